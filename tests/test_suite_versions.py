"""Suite versions: a run records the version of its items, rescoring renders that version's items, and
nothing mixes two versions (issue 16 item 5)."""
from __future__ import annotations

import pandas as pd
import pytest

import evenhand as eh
from evenhand.runs.rundir import RunError
from evenhand.rows.schema import RowError, load_rows
from evenhand.running.stages import open_run
from evenhand.suite.content import items_version, load_content
from experiments.studies.run.config import ConfigError, config_from_dict


@pytest.fixture(scope="module")
def v1_items() -> pd.DataFrame:
    return eh.suite.items("smoke", version="1", n=40)


def test_items_carry_the_version_asked_for(v1_items):
    assert items_version(v1_items) == load_content("1").version
    assert items_version(eh.suite.items("smoke", n=8)) == load_content().version
    with pytest.raises(ValueError, match="organism_heldout"):
        eh.suite.items("organism_heldout", version="2")


def test_a_v1_run_rescored_renders_v1_items(tmp_path, v1_items):
    """Rows that name suite v1 are joined with v1's items, whatever the default version is."""
    rows = v1_items[["item_id", "suite_version"]].assign(text="Applicant A")
    f = tmp_path / "answers.csv"
    rows.to_csv(f, index=False)
    df = load_rows(f)
    assert df.attrs["joined"] == load_content("1").version
    assert (df["degree"].to_numpy() == v1_items["degree"].to_numpy()).all()


def test_rows_of_an_unknown_or_second_version_are_refused(tmp_path, v1_items):
    rows = v1_items[["item_id", "suite_version"]].head(4).assign(text="A")
    rows.loc[1, "suite_version"] = "1.0+0000000000"  # a v1 whose content this EvenHand does not ship
    f = tmp_path / "answers.csv"
    rows.to_csv(f, index=False)
    with pytest.raises(RowError, match="field 'suite_version' is '1.0\\+0000000000'"):
        load_rows(f)


def test_resuming_a_run_on_items_of_another_version_is_refused(tmp_path):
    config = {"model": "m", "suite": {"subset": "smoke"}}
    run = open_run(tmp_path / "run", config, suite_version=load_content("1").version)
    run.unlock()
    with pytest.raises(RunError, match="holds a run on suite 1.0.*these items are suite 2.0"):
        open_run(tmp_path / "run", config, suite_version=load_content("2").version)
    again = open_run(tmp_path / "run", config, suite_version=load_content("1").version)  # same version resumes
    again.unlock()
    assert again.manifest()["suite_version"] == load_content("1").version


@pytest.mark.parametrize("suite, message", [
    ({"subset": "smoke", "version": "3"}, "field 'suite.version'"),
    ({"subset": "organism_heldout", "version": "2"}, "organism_heldout is the committed organism's suite version 1"),
])
def test_config_suite_version_errors_name_the_field(tmp_path, suite, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"model": "evenhand-organism", "output_dir": str(tmp_path / "o"), "suite": suite})
