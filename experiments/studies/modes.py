"""The same switch on our suite: one model, one item set, decided in ``logprob`` and in ``answer`` mode.

FairStress found that the direction of a measured lean can flip with the way a
benchmark asks. :func:`mode_switch` decides the items both ways (a run directory
with a manifest; resumable: ``OUT/answer/`` and ``OUT/logprob/``), scores each, and compares them on the
same items with the paired jackknife-t interval of :func:`evenhand.metrics.compare`
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
    """Decide ``items`` in both modes; returns (tidy table, raw comparison). ``out_dir`` is a run directory
    (:mod:`evenhand.stages`): a mode whose responses are written is skipped on a rerun."""
    import hashlib
    from dataclasses import asdict

    from .checks import warn_unparseable
    from .decisions import DecideOptions, decide
    from .metrics import compare, score
    from .runs import RunDir
    from .schema import validate_rows
    from .stages import LoadModel, Step, finished_with, open_run, run_stages
    ids = hashlib.sha256("\n".join(map(str, items["item_id"])).encode()).hexdigest()[:16]
    run = open_run(out_dir, {"kind": "mode_switch", "model": asdict(lm.spec), "chat_template": chat_template,
                             "n_items": len(items), "items_sha256": ids},
                   n_items=len(items), batch_size=batch_size, resamples=resamples, seeds={"bootstrap": seed})

    def decide_in(mode: str) -> Step:
        def go(run: RunDir) -> pd.DataFrame:
            d = run.mode_dir(mode)
            d.path.mkdir(parents=True, exist_ok=True)
            table = decide(items, lm, DecideOptions(mode=mode, batch_size=batch_size, chat_template=chat_template,
                                                    progress=progress), out_dir=d.path)
            d.write_responses(table)
            warn_unparseable(table, run, part=f"{mode} mode")
            return table
        return Step(mode, go, finished_with(lambda r: r.mode_dir(mode).responses_path))

    modes = [decide_in(m) for m in ("answer", "logprob")]
    result: dict = {}

    def compared(run: RunDir) -> None:
        resp = {s.name: validate_rows(s.result if s.result is not None else run.mode_dir(s.name).read_responses())
                for s in modes}
        reports = {m: score(r, resamples=resamples, seed=seed) for m, r in resp.items()}
        cmp = compare(resp["answer"], resp["logprob"], resamples=resamples, seed=seed)
        result.update(table=switch_rows(reports, cmp), raw={"reports": reports, "compare": cmp})

    run_stages(run, [LoadModel(lambda: lm), *modes, Step("compare", compared)])
    return result["table"], result["raw"]


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
