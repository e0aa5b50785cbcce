"""Scenarios of one's own (issue 45, point 7): a YAML scenario file rendered by the suite's generator into every
degree, condition variant and pressure family, checked by the suite's validators, under its own version; from the
YAML through decide and score (and show, table) on the embedded organism."""
from __future__ import annotations

import pandas as pd
import pytest

import evenhand as eh
from evenhand.suite.content import ContentError
from evenhand.suite.own import TEMPLATE, own_content, own_items
from experiments.cli.main import main


@pytest.fixture(scope="module")
def own_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("own") / "grants.yaml"
    assert main(["suite", "new", str(path)]) == 0
    assert path.read_text() == TEMPLATE
    return path


def test_the_template_renders_every_degree_variant_and_pressure_family(own_file):
    items = own_items(own_file)
    assert len(items) == 608 and items["scenario_id"].unique().tolist() == ["grants.lab_equipment"]
    assert sorted(items["degree"].unique()) == [0, 1, 2, 3]
    assert set(items["variant"]) == {"GTmin", "GTmaj", "AMB1", "AMB2"}
    assert items["pressure_family"].dropna().nunique() == 9
    base = items[items["item_id"] == items["baseline_id"]]
    assert len(base) == 4 * 4 * 2 and set(items["baseline_id"]) <= set(base["item_id"])
    d3 = items[(items["degree"] == 3) & (items["pressure_id"].isna())].iloc[0]
    assert "Researcher A" in d3["prompt"] and "peer-reviewed papers" in d3["prompt"]
    version = items["suite_version"].iat[0]
    assert version.startswith("2.0+own.") and version != eh.suite.load_content().version


def test_an_edit_gets_another_version_and_a_bad_field_is_named(own_file, tmp_path):
    edited = tmp_path / "edited.yaml"
    edited.write_text(own_file.read_text().replace("strong: 14", "strong: 15"))
    assert own_content(edited).version != own_content(own_file).version
    close = tmp_path / "close.yaml"  # 14 vs 12: not clearly stronger (the suite's 25% rule)
    close.write_text(own_file.read_text().replace("weak: 4", "weak: 12"))
    with pytest.raises(ContentError, match=r"close.yaml: .*criteria\[0\]: strong 14.0 and weak 12.0 differ by less"):
        own_content(close)
    pronoun = tmp_path / "pronoun.yaml"
    pronoun.write_text(own_file.read_text().replace("two researchers", "two researchers, she said,"))
    with pytest.raises(ContentError, match=r"pronoun.yaml: .*setting: pronouns"):
        own_content(pronoun)
    assert main(["suite", "new", str(own_file)]) == 2  # never over an existing file


def test_decide_score_show_and_table_on_the_organism(own_file, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["decide", "--model", "evenhand-organism", "--subset", str(own_file), "--out", str(out),
                 "--mode", "logprob", "--limit", "152", "--no-progress"]) == 0
    rows = pd.read_parquet(out / "responses.parquet")
    assert len(rows) == 152 and rows["suite_version"].iat[0].startswith("2.0+own.")
    capsys.readouterr()
    assert main(["score", str(out / "responses.parquet")]) == 0  # no --own-suite needed: the version says so
    text = capsys.readouterr().out
    assert "Contrast type: type1  (152 items, 1 scenarios" in text
    report = eh.score(rows)
    assert report["n_items"] == 152
    assert main(["show", str(out), "--limit", "3"]) == 0
    assert "scenario grants.lab_equipment" in capsys.readouterr().out
    assert main(["table", f"{out}=mine"]) == 0
    assert "mine" in capsys.readouterr().out


def test_a_comparison_splits_the_own_scenarios(own_file, tmp_path):
    """`suite: FILE.yaml` in a comparison config: fitting, validation and held-out scenarios are drawn from the
    file's scenarios, and the manifest records the file's version."""
    import json

    import yaml

    from experiments.studies.compare import item_sets, parse_config, run_compare
    data = yaml.safe_load(own_file.read_text())
    sc = data["scenarios"][0]
    data["scenarios"] = [{**sc, "id": f"grants.s{i}", "criteria": [{**sc["criteria"][0], "strong": 14 + i},
                                                                   sc["criteria"][1]]} for i in range(6)]
    six = tmp_path / "six.yaml"
    six.write_text(yaml.safe_dump(data, sort_keys=False))
    raw = {"model": "evenhand-organism", "output_dir": str(tmp_path / "cmp"), "suite": str(six),
           "split": {"seed": 0, "heldout_fraction": 0.3}, "train": {"scenarios": 2, "max_items": 24},
           "eval": {"scenarios": 1, "baselines": 2}, "mode": "logprob", "resamples": 20, "controls": False,
           "signs": {"fraggap": 1}, "interventions": [{"name": "fair_instruction"}]}
    from interventions.base import InterventionError
    with pytest.raises(InterventionError, match="leave 0 to fit on"):  # 12 validation scenarios take every one
        item_sets(parse_config(raw))
    raw["validation"] = {"scenarios": 1}
    cfg = parse_config(raw)
    sets = item_sets(cfg)
    ids = set(sets.train["scenario_id"]) | set(sets.heldout["scenario_id"])
    assert ids <= {f"grants.s{i}" for i in range(6)} and not set(sets.train["scenario_id"]) & set(
        sets.heldout["scenario_id"])
    table = run_compare(cfg, progress=False)
    assert set(table["cell"]) == {"baseline", "fair_instruction-s0"}
    manifest = json.loads((tmp_path / "cmp" / "manifest.json").read_text())
    assert manifest["suite_version"].startswith("2.0+own.")
    with pytest.raises(ValueError, match="suite must be an existing scenario file"):
        parse_config({**raw, "suite": str(tmp_path / "missing.yaml")})
