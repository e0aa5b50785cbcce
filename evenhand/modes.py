"""The same switch on our suite: one model, one item set, decided in ``logprob`` and in ``answer`` mode.

FairStress found that the direction of a measured lean can flip with the way a
benchmark asks. :func:`mode_switch` decides the items both ways (resumable:
``OUT/answer/`` and ``OUT/logprob/``), scores each, and compares them on the
same items with the paired bootstrap of :func:`evenhand.metrics.compare`
(``logprob`` minus ``answer``). :func:`switch_rows` turns that into a tidy
table: per mode TieLean and AccGap (and accuracy, FragGap, TieShift) with CIs,
and the paired difference with its CI; ``flips`` says whether the two modes'
TieLean lie on opposite sides of 0.5 with CIs that exclude it.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

METRICS = ("tielean", "accgap", "accuracy", "fraggap", "tieshift")


def mode_switch(items: pd.DataFrame, lm, out_dir: str | Path, batch_size: int = 16, chat_template: str = "auto",
                resamples: int = 1000, seed: int = 0, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Decide ``items`` in both modes; returns (tidy table, raw comparison)."""
    from .decide import DecideOptions, decide
    from .metrics import compare, score
    from .runs import write_table_atomic
    from .schema import validate_rows
    out = Path(out_dir)
    resp = {}
    for mode in ("answer", "logprob"):
        d = out / mode
        d.mkdir(parents=True, exist_ok=True)
        table = decide(items, lm, DecideOptions(mode=mode, batch_size=batch_size, chat_template=chat_template,
                                                progress=progress), out_dir=d)
        write_table_atomic(d / "responses.parquet", table)
        resp[mode] = validate_rows(table)
    reports = {m: score(r, resamples=resamples, seed=seed) for m, r in resp.items()}
    cmp = compare(resp["answer"], resp["logprob"], resamples=resamples, seed=seed)
    return switch_rows(reports, cmp), {"reports": reports, "compare": cmp}


def switch_rows(reports: dict, cmp: dict) -> pd.DataFrame:
    rows = []
    for metric in METRICS:
        for mode in ("answer", "logprob"):
            e = reports[mode]["overall"][metric]
            rows.append({"metric": metric, "stat": mode, **{k: e.get(k) for k in ("value", "ci_low", "ci_high", "n")}})
        d = cmp["difference"][metric]
        rows.append({"metric": metric, "stat": "logprob_minus_answer",
                     **{k: d.get(k) for k in ("value", "ci_low", "ci_high", "n")}})
    table = pd.DataFrame(rows)
    a = reports["answer"]["overall"]["tielean"]
    b = reports["logprob"]["overall"]["tielean"]

    def side(e):
        if e.get("ci_low") is None or e.get("ci_high") is None:
            return 0
        return 1 if e["ci_low"] > 0.5 else (-1 if e["ci_high"] < 0.5 else 0)
    table.attrs["flips"] = bool(side(a) * side(b) == -1)
    return table
