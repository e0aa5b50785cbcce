"""Many runs, one table (issue 31 item 4): `evenhand table` / `eh.table` give each run's degree-3 headline with
CI, n and k exactly as `evenhand score` prints it, label runs (RUN=label, --labels, the model's name), and refuse
runs on different suite versions or different items, naming each run's version or subset."""
from __future__ import annotations

import pandas as pd
import pytest

import evenhand as eh
from evenhand.vocab.metric_defs import headline
from evenhand.reporting.multirun import TABLE_COLUMNS, split_label, tex_text
from evenhand.runs.rundir import RunDir
from evenhand.scoring.score_report import format_estimate
from experiments.cli.main import main


def _run(path, items: pd.DataFrame, seed: int, manifest: dict | None = None):
    resp = eh.SimulatedModel(seed=seed).decide(items)
    run = RunDir(path)
    run.write_responses(resp)
    if manifest is not None:
        run.write_manifest(manifest)
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    v2 = eh.suite.items("smoke")
    v1 = eh.suite.items("smoke", version="1")
    return {"a": _run(root / "a", v2, 0), "b": _run(root / "b", v2, 1),
            "half": _run(root / "half", v2.head(512), 2,
                         {"config": {"suite": {"subset": "smoke", "seed": 0, "limit": 512}}, "status": "done"}),
            "v1": _run(root / "v1", v1, 0, {"config": {}, "suite_version": v1["suite_version"].iloc[0],
                                            "status": "done"})}


def test_each_row_is_what_score_prints(runs):
    t = eh.table([runs["a"].path, f"{runs['b'].path}=second"])
    f = t.to_frame()
    assert list(f.columns) == list(TABLE_COLUMNS) and t.labels()[1] == "second"
    assert t.metrics() == list(headline())
    rep = eh.score(runs["b"].read_responses())
    for m in headline():
        row = f[(f["label"] == "second") & (f["metric"] == m)].iloc[0]
        e = rep["by_degree"]["3"][m]
        assert (row["value"], row["n"], row["k"]) == (pytest.approx(e["value"]), e["n"], e["clusters"])
        assert format_estimate(e, m) in t.text()


def test_mixed_suite_versions_are_refused_with_each_version(runs):
    with pytest.raises(ValueError, match="different suite versions") as exc:
        eh.table([runs["a"].path, runs["v1"].path])
    msg = str(exc.value)
    assert "1.0+" in msg and "2.0+" in msg


def test_different_items_are_refused_with_each_subset(runs):
    with pytest.raises(ValueError, match="different items") as exc:
        eh.table([runs["a"].path, runs["half"].path])
    msg = str(exc.value)
    assert "512 type1 items" in msg and "256 type1 items, subset smoke seed 0 limit 512" in msg and "256 shared" in msg


def test_labels(runs, tmp_path):
    assert split_label("runs/x=β = 40") == ("runs/x", "β = 40")
    (tmp_path / "a=b").mkdir()
    assert split_label(str(tmp_path / "a=b")) == (str(tmp_path / "a=b"), None)
    again = RunDir(tmp_path / "again")
    again.write_responses(runs["a"].read_responses())
    t = eh.table([runs["a"].path, again.path, runs["b"].path])
    model = runs["a"].read_responses()["model"].iloc[0]
    other = runs["b"].read_responses()["model"].iloc[0]
    assert t.labels() == [f"{model} (a)", f"{model} (again)", other]  # one model twice: its directory tells them apart
    with pytest.raises(ValueError, match="share the label"):
        eh.table([runs["a"].path, runs["b"].path], labels=["x", "x"])
    with pytest.raises(ValueError, match="2 labels for 1 runs"):
        eh.table([runs["a"].path], labels=["x", "y"])


def test_cli_writes_text_csv_latex(runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["table", f"{runs['a'].path}=first", str(runs["b"].path), "--labels", "one,two",
                 "--csv", str(out / "t.csv"), "--latex", str(out / "t.tex")]) == 0
    text = capsys.readouterr().out
    assert "one" in text and "two" in text and "k=" in text and "n=" in text
    csv = pd.read_csv(out / "t.csv")
    assert set(csv["label"]) == {"one", "two"} and len(csv) == 2 * len(headline())
    tex = (out / "t.tex").read_text()
    assert r"\toprule" in tex and "one &" in tex and "$n=" in tex and "minority-coded" in tex
    assert tex_text("β = 40 & x_1") == r"$\beta$ = 40 \& x\_1"  # pdfLaTeX takes a Greek label
    assert main(["table", str(runs["a"].path), str(runs["v1"].path)]) == 2
    err = capsys.readouterr().err
    assert "different suite versions" in err and len(err.strip().splitlines()) == 1
    assert main(["table", str(tmp_path / "nothing")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_manifest_version_is_read(runs, tmp_path):
    """A run whose manifest records another suite version than a second run's rows is refused even when the
    rows of both carry no version column."""
    a = RunDir(tmp_path / "a")
    a.write_responses(runs["a"].read_responses().drop(columns=["suite_version"]))
    b = RunDir(tmp_path / "b")
    b.write_responses(runs["b"].read_responses().drop(columns=["suite_version"]))
    b.write_manifest({"config": {}, "suite_version": "9.9", "status": "done"})
    with pytest.raises(ValueError, match="different suite versions.*9.9"):
        eh.table([a.path, b.path])


def test_a_bare_major_version_agrees_with_its_full_version():
    from evenhand.reporting.multirun import same_version
    assert same_version("2", "2.0+a94e5fc473") and same_version("2.0+a", "2.0+a")
    assert not same_version("1", "2.0+a94e5fc473") and not same_version("2.0+a", "2.0+b")
    assert not same_version("not recorded", "2")
