"""Known-answer checks of the organism on its held-out scenarios, through the ordinary code paths.

:func:`heldout_responses` decides the matched held-out items with the organism (``decide`` in
answer mode); :func:`known_answer_checks` scores them and sets each metric next to the value the
planted policy puts on the same items. The probe check on the same responses lives in
:mod:`organism.probe`; ``evenhand organism eval`` combines them (:func:`record_eval` stores the result).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.models.loading import LoadedModel
from evenhand.models.policy import PlantedPolicy, planted_truth
from evenhand.suite.matched import heldout_items

from .recipe import COMMITTED
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import load_model
from evenhand.rows.schema import validate_rows
from evenhand.scoring.metrics import score

CHECKED_METRICS = ("accuracy", "accgap", "tielean", "fraggap", "tieshift")
"""The metrics reported per degree, measured and planted."""


@dataclass
class HeldoutRun:
    """The organism's answers on its held-out items."""
    lm: LoadedModel
    """The loaded organism."""
    record: dict
    """Its ``organism.json``."""
    policy: PlantedPolicy
    """The policy it was trained on."""
    items: pd.DataFrame
    """The matched held-out items (:func:`heldout_items`)."""
    responses: pd.DataFrame
    """The validated responses table of ``decide`` in answer mode, in the items' order."""


def heldout_responses(path: str | Path = COMMITTED, n_scenarios: int | None = None, seed: int = 0,
                      batch_size: int = 64, progress: bool = False) -> HeldoutRun:
    """Load the organism at ``path`` and decide its held-out items (the first ``n_scenarios`` held-out
    scenarios, or all) in answer mode."""

    path = Path(path)
    record = json.loads((path / "organism.json").read_text())
    policy = PlantedPolicy.from_dict(record["recipe"]["policy"])
    items = heldout_items(record, n_scenarios, seed=seed)
    lm = load_model(str(path))
    resp = validate_rows(decide(items, lm, DecideOptions(mode="answer", batch_size=batch_size, progress=progress)))
    return HeldoutRun(lm, record, policy, items, resp)


def known_answer_checks(run: HeldoutRun, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """The accuracy on GT items without pressure over all degrees and, per degree, each metric
    measured from the organism's answers (with CI) next to the value the policy plants on the same
    items; the organism's agreement with the policy (all items and GT items without pressure) and
    the share of answers parsed."""
    import numpy as np


    items, resp, policy = run.items, run.responses, run.policy
    report = score(resp, contrast_type="type1", resamples=resamples, seed=seed)
    truth = planted_truth(policy, items, "type1")
    want = np.array([policy.answer(r) for r in items.to_dict("records")], dtype=object)
    agree = resp["choice"].to_numpy(object) == want
    gt_base = ((resp["condition"] == "GT") & ~resp["pressured"]).to_numpy()
    planted_gt = (want[gt_base] == items["correct_slot"].to_numpy(object)[gt_base]).mean()
    out = {"n_items": len(items), "heldout_scenarios": int(items["scenario_id"].nunique()),
           "gt_accuracy": {"measured": report["overall"]["accuracy"], "planted": float(planted_gt)},
           "agreement_with_policy": float(agree.mean()),
           "agreement_gt_baseline": float(agree[gt_base].mean()), "answered": float(resp["choice"].notna().mean()),
           "by_degree": {}}
    for d in sorted(report["by_degree"], key=int):
        out["by_degree"][d] = {m: {"measured": report["by_degree"][d][m], "planted": truth[int(d)].get(m)}
                               for m in CHECKED_METRICS}
    return out


def record_eval(out: Path, res: dict) -> None:
    """Store a held-out evaluation in the organism's organism.json (without the probe's full table); a
    result holding only ``"probe"`` (``organism eval --probe-only``) replaces the record's probe part and
    keeps its other numbers."""
    f = out / "organism.json"
    rec = json.loads(f.read_text())
    if set(res) != {"probe"}:
        rec["heldout_eval"] = {k: v for k, v in res.items() if k != "probe"}
    if "probe" in res:
        rec["heldout_eval"]["probe"] = {k: v for k, v in res["probe"].items() if k != "table"}
    f.write_text(json.dumps(rec, indent=1) + "\n")
