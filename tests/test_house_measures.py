"""benchmarks/house_measures.py reads floors as the layers contract writes them and counts an import from a lower
floor up as a back arrow. The bad case: a ground-floor module importing a running-floor one is reported (and a
same-floor or downward import is not)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import house_measures as hm  # noqa: E402


class Graph:
    """The two grimp calls back_arrows makes, on a hand-written import list."""

    def __init__(self, imports: dict[str, set[str]]):
        self.imports = imports
        self.modules = set(imports) | {b for bs in imports.values() for b in bs}

    def find_modules_directly_imported_by(self, m):
        return self.imports.get(m, set())

    def get_import_details(self, importer, imported):
        return [{"line_number": 3}]


CONTRACT = {"containers": "evenhand", "layers": "\n    running : reporting\n    runs\n    inference | support"}


def test_floors_read_top_first_with_both_separators():
    assert hm.floors(CONTRACT) == [["evenhand.running", "evenhand.reporting"], ["evenhand.runs"],
                                   ["evenhand.inference", "evenhand.support"]]
    assert hm.floor_of("evenhand.runs.rundir.paths", hm.floors(CONTRACT)) == 1
    assert hm.floor_of("evenhand.other", hm.floors(CONTRACT)) is None


def test_an_import_up_a_floor_is_a_back_arrow_and_nothing_else_is():
    graph = Graph({"evenhand.inference.stats": {"evenhand.running.decisions", "evenhand.support.lazy"},
                   "evenhand.running.decisions": {"evenhand.running.stages", "evenhand.runs.rundir", "evenhand.inference.stats"},
                   "evenhand.runs.rundir": {"evenhand.inference.stats"}})
    assert hm.back_arrows(graph, hm.floors(CONTRACT)) == ["evenhand.inference.stats -> evenhand.running.decisions (l.3)"]
