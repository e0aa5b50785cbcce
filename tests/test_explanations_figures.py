"""`evenhand figures` on a reasoning-mode run draws the explanation measures beside the explanation words."""
from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("vaderSentiment")


def test_run_figures_write_the_explanation_measures(tmp_path):
    from experiments.figures import run_figures
    from experiments.studies.simulate import simulate_run
    run = tmp_path / "sim"
    simulate_run(run, form="policy", resamples=50)
    resp = pd.read_parquet(run / "responses.parquet")
    words = {"A": "Clearly the stronger record, an excellent candidate.", "B": "Perhaps the record suggests a fit."}
    resp["mode"] = "reasoning"
    resp["text"] = [f"{words.get(c, '')} Final answer: {n} {c}" for c, n in zip(resp["choice"], resp["candidate_noun"])]
    resp.to_parquet(run / "responses.parquet")
    paths = {p.name for p in run_figures([run], tmp_path / "fig", ("png",), resamples=50)}
    assert {"explanation_measures.png", "explanation_measures.csv"} <= paths | {
        p.name for p in (tmp_path / "fig").iterdir()}
    table = pd.read_csv(tmp_path / "fig" / "explanation_measures.csv")
    assert set(table["measure"]) == {"hedges", "boosters", "positivity", "identity", "criteria_cited", "values_cited"}
    assert (table["k"] > 0).all()
