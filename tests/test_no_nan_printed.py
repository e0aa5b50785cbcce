"""No command prints ``nan`` (issue 45, point 5): every command a new user runs after the quickstart, on a small
quickstart-like pair of runs (a simulated run, and the organism deciding its held-out items), scanned for the word.

The scan can fail: :func:`test_the_scan_finds_a_nan` feeds it the intervention-score line `compare-runs` printed
before (``... n=6824 (nan)``)."""
from __future__ import annotations

import re

import pytest

from experiments.cli.main import main

NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def nan_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if NAN.search(ln)]


def test_the_scan_finds_a_nan():
    assert nan_lines("  change toward zero, fraggap  -10.0 pp [-14.1, -5.9] n=6824 (nan)  no change")
    assert not nan_lines("  FragGap  +14.4 pp [-6.2, +35.1] n=63 k=7 (financial domain)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("nan")
    assert main(["simulate", "--out", str(d / "sim"), "--subset", "smoke"]) == 0
    assert main(["simulate", "--out", str(d / "sim2"), "--subset", "smoke", "--model-seed", "1"]) == 0
    assert main(["decide", "--model", "evenhand-organism", "--subset", "organism_heldout", "--limit", "152",
                 "--mode", "logprob", "--out", str(d / "org"), "--no-progress"]) == 0
    return d


def test_no_command_prints_nan(runs, capsys):
    capsys.readouterr()
    sim, sim2, org = (str(runs / n) for n in ("sim", "sim2", "org"))
    commands = [["score", f"{sim}/responses.parquet"], ["score", f"{org}/responses.parquet"],
                ["table", sim, f"{sim2}=other"], ["table", org],
                ["power", sim, "--target", "0.05"], ["power", org, "--target", "0.05"],
                ["compare-runs", f"{sim}/responses.parquet", f"{sim2}/responses.parquet"],
                ["compare-runs", f"{sim}/responses.parquet", f"{sim2}/responses.parquet", "--degrees", "0", "1", "2",
                 "3"],
                ["runs", "list", str(runs)], ["report", sim], ["figures", sim], ["figures", org],
                ["interventions", "list"], ["suite", "stats"]]
    commands += [["show", run, *f] for run in (sim, org) for f in ([], ["--refusals"], ["--unparsed"], ["--flipped"])]
    found = {}
    for cmd in commands:
        rc = main(cmd)
        out = capsys.readouterr()
        assert rc == 0, (cmd, out.err)
        bad = nan_lines(out.out + out.err)
        if bad:
            found[" ".join(cmd)] = bad[:3]
    assert not found, found
