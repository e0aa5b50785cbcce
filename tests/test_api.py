"""The public API: `import evenhand as eh` (lazy, cheap), the package exports, the item loader,
scoring raw decide output, and the README's notebook example run as it is written."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import evenhand as eh
import interventions
import probes
import steering

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [eh, eh.suite, probes, steering, interventions]


def _python(code: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_import_is_cheap():
    r = _python("import sys, evenhand, evenhand.suite, probes, steering, interventions\n"
                "heavy = sorted({'torch', 'transformers', 'nnsight', 'pandas', 'sklearn'} & set(sys.modules))\n"
                "assert not heavy, heavy")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.__name__)
def test_every_export_resolves_with_a_docstring(pkg):
    """Every name in ``__all__`` loads; the core's functions and classes carry docstrings and type hints."""
    assert pkg.__all__ and sorted(pkg.__all__) == list(pkg.__all__)
    for name in pkg.__all__:
        obj = getattr(pkg, name)
        assert name in dir(pkg)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and pkg.__name__.startswith("evenhand"):
            assert (obj.__doc__ or "").strip(), f"{pkg.__name__}.{name} has no docstring"
        if inspect.isfunction(obj) and pkg.__name__.startswith("evenhand"):
            params = inspect.signature(obj).parameters.values()
            assert all(p.annotation is not inspect.Parameter.empty for p in params), \
                f"{pkg.__name__}.{name} lacks type hints"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(pkg, "nope")


def test_eh_decide_is_the_function_whatever_is_imported_first():
    # importing the engine module (here through the cache module) must not rebind eh.decide to the module
    r = _python("import evenhand as eh, evenhand.running.activations, inspect\n"
                "assert inspect.isfunction(eh.decide), eh.decide\n"
                "from evenhand.running.decisions import plan_batches\n"
                "from evenhand import decide\n"
                "assert decide is eh.decide and decide.__module__ == 'evenhand.running.decisions'")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ the item loader

def test_items_spread_covers_scenarios_and_keeps_baselines():
    first = eh.suite.items("smoke", head=200)
    spread = eh.suite.items("smoke", n=200)
    assert len(first) == len(spread) == 200
    assert spread["scenario_id"].nunique() >= 45 > first["scenario_id"].nunique()
    assert spread["item_id"].is_unique
    pressured = spread[spread["item_id"] != spread["baseline_id"]]
    assert len(pressured) and pressured["baseline_id"].isin(spread["item_id"]).all()
    assert spread.equals(eh.suite.items("smoke", n=200)), "deterministic from the seed"
    assert not spread.equals(eh.suite.items("smoke", n=200, seed=1))
    assert {"GT", "AMB"} == set(spread["condition"]) and set(spread["degree"]) == {0, 1, 2, 3}


def test_items_filters_and_errors():
    df = eh.suite.items("smoke", degrees=[3], contrast_types=["type1"])
    assert set(df["degree"]) == {3} and set(df["contrast_type"]) == {"type1"} and len(df) > 0
    one = df["scenario_id"].iloc[0]
    assert set(eh.suite.items("smoke", scenarios=[one])["scenario_id"]) == {one}
    assert len(eh.suite.items("smoke", n=10**6)) == 1024
    with pytest.raises(ValueError, match="not both"):
        eh.suite.items("smoke", n=10, head=10)
    with pytest.raises(ValueError, match="unknown subset 'smok'"):
        eh.suite.items("smok")


def test_items_from_a_file_and_the_run_config_use_the_same_loader(tmp_path):
    from experiments.studies.run.config import SuiteConfig
    from experiments.studies.run.local import suite_items
    path = tmp_path / "items.parquet"
    eh.suite.items("smoke", n=40).to_parquet(path)
    assert len(eh.suite.items(path)) == 40
    cfg = SuiteConfig(subset="smoke", seed=2, degrees=(1, 2), contrast_types=("type23",), limit=30)
    pd.testing.assert_frame_equal(suite_items(cfg), eh.suite.items("smoke", seed=2, degrees=[1, 2],
                                                                     contrast_types=["type23"], n=30))
    first = eh.suite.items("smoke", seed=2, degrees=[1, 2], contrast_types=["type23"], head=30)
    assert suite_items(cfg)["scenario_id"].nunique() > first["scenario_id"].nunique()  # a spread, not the first N


# ------------------------------------------------------------------ loading

def test_load_model_by_preset_with_options_and_by_path():
    lm = eh.load_model(eh.ORGANISM, chat_template="none")
    assert lm.name == eh.ORGANISM and lm.spec.chat_template == "none"
    assert lm.spec.dtype == eh.PRESETS[eh.ORGANISM].spec.dtype == "float32", "the preset's other fields are kept"
    by_path = eh.load_model(eh.PRESETS[eh.ORGANISM].spec.model)
    assert by_path.meta["weights"] == lm.meta["weights"]
    with pytest.raises(TypeError):
        eh.load_model(eh.ORGANISM, no_such_field=1)


# ------------------------------------------------------------------ scoring raw decide output

@pytest.fixture(scope="module")
def organism_responses():
    lm = eh.load_model(eh.ORGANISM)
    items = eh.suite.items("smoke", n=96, version="1")  # the organism's own suite version
    return eh.decide(items, lm, eh.DecideOptions(batch_size=32, progress=False))


def test_score_accepts_raw_decide_output(organism_responses):
    raw = organism_responses
    assert "excluded" not in raw.columns and "pressured" not in raw.columns
    report = eh.score(raw, resamples=20)
    assert report == eh.score(eh.validate_rows(raw), resamples=20)
    assert report["n_items"] == int((raw["contrast_type"] == report["contrast_type"]).sum())
    assert report["overall"]["accuracy"]["value"] is not None


def test_score_names_a_bad_row(organism_responses):
    bad = organism_responses.copy()
    bad.loc[3, "condition"] = "MAYBE"
    with pytest.raises(eh.RowError, match="row 3 .*field 'condition'"):
        eh.score(bad, resamples=10)


# ------------------------------------------------------------------ the score report

@pytest.fixture(scope="module")
def simulated_report(smoke_items):
    from evenhand.models.simulated import PlantedBias, SimulatedModel
    return eh.score(SimulatedModel(PlantedBias(), seed=0).decide(smoke_items))


def test_score_report_prints_the_degree3_headline_with_n_and_k(simulated_report):
    from evenhand.vocab.metric_defs import get_metric, score_rows
    from experiments.studies.text import score_table
    text = str(simulated_report)
    assert repr(simulated_report) == text
    assert "Headline (degree 3, explicit labels); 95% CIs: jackknife-t over scenarios; n items, k scenarios" in text
    d3 = simulated_report["by_degree"]["3"]
    lines = [line for line in text.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in lines] == [get_metric(m).label.split()[0] for m in score_rows()]
    for m, line in zip(score_rows(), lines):
        assert f"n={d3[m]['n']} k={d3[m]['clusters']}" in line, line
    fraggap = next(line for line in lines if line.strip().startswith("FragGap"))
    v, lo, hi = (100 * d3["fraggap"][f] for f in ("value", "ci_low", "ci_high"))
    assert f"{v:+.1f} pp [{lo:+.1f}, {hi:+.1f}]" in fraggap
    cli = score_table(simulated_report).splitlines()  # the same lines `evenhand score` prints
    assert all(line in cli for line in lines)
    assert "D1" not in text and "All degrees pooled" not in text  # the headline only


def test_score_report_to_frame_is_tidy_and_matches_the_dict(simulated_report):
    from evenhand.vocab.metric_defs import metric_names
    df = simulated_report.to_frame()
    assert list(df.columns) == ["metric", "degree", "estimate", "low", "high", "n", "k", "interval"]
    assert len(df) == (len(simulated_report["by_degree"]) + 1) * len(metric_names())
    assert set(df["interval"]) == {"jackknife-t over scenarios"}
    row = df[(df["metric"] == "fraggap") & (df["degree"] == 3)].iloc[0]
    est = simulated_report["by_degree"]["3"]["fraggap"]
    assert (row["estimate"], row["low"], row["high"], row["n"], row["k"]) == (
        est["value"], est["ci_low"], est["ci_high"], est["n"], est["clusters"])
    pooled = df[df["degree"].isna() & (df["metric"] == "accuracy")].iloc[0]
    assert pooled["estimate"] == simulated_report["overall"]["accuracy"]["value"]


def test_score_report_keeps_dict_access_and_records_no_unused_resamples(simulated_report, smoke_items):
    import json
    rep = simulated_report
    assert isinstance(rep, dict) and isinstance(rep, eh.ScoreReport)
    assert rep["overall"]["accuracy"]["value"] is not None and rep["by_degree"]["3"]["fraggap"]["n"] > 0
    assert json.loads(json.dumps(rep)) == rep == rep.to_dict() and type(rep.to_dict()) is dict
    assert rep["interval"] == "jackknife-t" and "resamples" not in rep and "seed" not in rep
    from evenhand.models.simulated import PlantedBias, SimulatedModel
    rows = SimulatedModel(PlantedBias(), seed=0).decide(smoke_items)
    assert eh.score(rows, resamples=10) == eh.score(rows, resamples=500, seed=3) == rep  # the jackknife-t reads neither


def test_an_organism_on_another_suite_version_is_stated():
    lm = eh.load_model(eh.ORGANISM)
    with pytest.warns(UserWarning, match=r"trained on suite version 1, but these items are of suite 2\.") as got:
        eh.decide(eh.suite.items("smoke", n=4), lm, eh.DecideOptions(progress=False))
    assert 'version="1"' in str(got[0].message)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        eh.decide(eh.suite.items("smoke", n=4, version="1"), lm, eh.DecideOptions(progress=False))


# ------------------------------------------------------------------ the README example

def readme_example(readme: str, heading: str = "## Python API") -> str:
    """The first fenced python block under ``heading`` in the README."""
    section = readme.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks, f"no python block under {heading!r}"
    return blocks[0]


def test_readme_example_runs_as_written(tmp_path):
    code = readme_example((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(code.strip().splitlines()) <= 15
    r = _python(code, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "control_accuracy" in r.stdout and "fraggap" in r.stdout
    assert "Headline (degree 3" in r.stdout and " n=" in r.stdout and " k=" in r.stdout  # print(report)
    assert "estimate" in r.stdout and "jackknife-t over scenarios" in r.stdout  # report.to_frame()
    assert "trained on suite version" not in r.stderr  # the example gives the organism its own version's items
    assert (tmp_path / "activations" / "index.json").exists()


def test_readme_example_extraction_fails_on_a_broken_example():
    broken = "# X\n\n## Python API\n\ntext\n\n```python\nimport evenhand as eh\neh.no_such_name()\n```\n\n## Next\n"
    code = readme_example(broken)
    assert code == "import evenhand as eh\neh.no_such_name()\n"
    assert _python(code).returncode != 0
    with pytest.raises(AssertionError, match="no python block"):
        readme_example("# X\n\n## Python API\n\nno code\n\n## Next\n")
