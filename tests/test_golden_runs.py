"""The golden-run digests (benchmarks/golden_runs.py) see a changed value and nothing else: two run directories
whose tables differ in one cell are reported with that cell's row (the bad case: a digest that ignored values), and
two that differ only in wall times, SHAs, dates, row order and the run's absolute path agree (the bad case: a
digest that flags every rerun)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import golden_runs as g  # noqa: E402


def write_run(run: Path, value: float = 0.25, seconds: float = 1.5, sha: str = "ab12", reverse: bool = False):
    """A small run directory: a parquet, a csv and a json table, with timings, a SHA and its own path in them."""
    run.mkdir(parents=True)
    frame = pd.DataFrame({"metric": ["fraggap", "flip", "refusal"], "value": [value, 0.5, 0.0],
                          "wall_s": [seconds] * 3, "decode_seconds": [seconds * 2] * 3})
    frame = frame.iloc[::-1] if reverse else frame
    frame.to_parquet(run / "metrics.parquet", index=False)
    frame.to_csv(run / "metrics.csv", index=False)
    (run / "manifest.json").write_text(json.dumps({
        "config": {"output_dir": str(run), "resamples": 40}, "git_sha": sha, "created_at": f"2026-12-0{int(seconds)}",
        "stages": [{"name": "decide", "seconds": seconds, "items": 96}], "status": "done"}))


def digest(tmp_path: Path, name: str, **kw) -> Path:
    run = tmp_path / name / "runs" / "x"
    write_run(run, **kw)
    roots = {str(run): "<RUN>", str(tmp_path / name): "<OUT>"}
    (tmp_path / name / "digest.json").write_text(json.dumps({"x": g.digest_run(run, roots, tmp_path / name /
                                                                                "normalised" / "x")}))
    return tmp_path / name / "digest.json"


def test_one_changed_cell_is_reported_with_its_row(tmp_path):
    a, b = digest(tmp_path, "a"), digest(tmp_path, "b", value=0.2500001)
    diff = g.compare(a, b)
    assert "x/metrics.parquet: differs" in diff and "x/metrics.csv: differs" in diff
    assert "x/manifest.json: differs" not in diff
    assert any("0.25" in line and line.lstrip().startswith("-") for line in diff)
    assert any("0.2500001" in line and line.lstrip().startswith("+") for line in diff)
    assert g.main(["--compare", str(a), str(b)]) == 1


def test_timings_shas_dates_order_and_paths_do_not_count(tmp_path):
    a = digest(tmp_path, "a")
    b = digest(tmp_path, "b", seconds=7.25, sha="cd34", reverse=True)
    assert g.compare(a, b) == []
    assert g.main(["--compare", str(a), str(b)]) == 0
    text = (tmp_path / "a" / "normalised" / "x" / "manifest.json.txt").read_text()
    assert "<RUN>" in text and str(tmp_path) not in text and "resamples" in text


def test_what_counts_as_volatile():
    for name in ("wall_s", "seconds", "decode_seconds", "git_sha", "sha256", "created_at", "date", "elapsed"):
        assert g.volatile(name), name
    for name in ("value", "ci_low", "flip_rate", "n_items", "metric", "candidates", "resamples"):
        assert not g.volatile(name), name


def test_every_registered_study_has_a_golden_run():
    from experiments.studies import kinds
    assert set(kinds()) <= set(g.RUNS), set(kinds()) - set(g.RUNS)
