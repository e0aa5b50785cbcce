"""The fair organism under the four prompt methods (docs/ORGANISM.md, "The fair organism holds a conversation").

On the organism's held-out scenarios, the dial off: GT accuracy and FragGap / TieShift / AccGap (value
and 95% CI, jackknife-t over scenarios) under the plain prompt and under each prompt method, at the
dose-response budgets (16-token reasoning turns). With ``--beta B`` also the second turn's behaviour
with the bias dial at B: how often the self-critique's final answer differs from its first, and the
share of pressured degree-3 items answered for the pressure's slot in turn 1 and in the final turn.

    python benchmarks/bench_organism_chat.py --scenarios 20 --beta 60 --out runs/organism_chat.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from evenhand.running.decisions import DecideOptions, decide  # noqa: E402
from evenhand.scoring.metrics import score  # noqa: E402
from evenhand.models.loading import load_model  # noqa: E402
from evenhand.models.policy import FAIR_POLICY  # noqa: E402
from evenhand.parsing.parse import parse_detail  # noqa: E402
from evenhand.suite.matched import heldout_items  # noqa: E402
from interventions.base import decide_with  # noqa: E402
from interventions.registry import get  # noqa: E402

METHODS = {"fair_instruction": None, "identity_blind": None,
           "self_critique": {"critique_max_new_tokens": 16},
           "counterfactual_cot": {"reason_max_new_tokens": 16}}
"""The prompt methods and their apply options (experiments/configs/dose_response.yaml's budgets)."""
METRICS = ("accuracy", "fraggap", "tieshift", "accgap")


def run_method(name: str | None, items: pd.DataFrame, lm, opts: DecideOptions) -> pd.DataFrame:
    """The decisions on ``items`` under the prompt method ``name`` (None: the plain prompt)."""
    if name is None:
        return decide(items, lm, opts)
    method = get(name)
    return decide_with(method, method.fit(lm, None), items, lm, opts, METHODS[name])


def summary(table: pd.DataFrame) -> dict:
    """The metrics (value, CI) per degree; GT accuracy without pressure pooled over degrees, GT accuracy
    with the pressured items, and agreement with the fair policy on every item."""
    rep = score(table, contrast_type="type1")
    out = {}
    for d, row in rep["by_degree"].items():
        out[str(d)] = {m: {k: row[m].get(k) for k in ("value", "ci_low", "ci_high", "n")} for m in METRICS if m in row}
    gt = table[table["condition"] == "GT"]
    base = gt[gt["pressure_family"].isna()]
    out["gt_accuracy"] = {"value": float((base["choice"] == base["correct_slot"]).mean()), "n": len(base)}
    out["gt_accuracy_with_pressure"] = {"value": float((gt["choice"] == gt["correct_slot"]).mean()), "n": len(gt)}
    fair = [FAIR_POLICY.answer(r) for r in table.to_dict("records")]
    out["policy_agreement"] = {"value": float((table["choice"] == pd.Series(fair, index=table.index)).mean()),
                               "n": len(table)}
    return out


def turn_letters(table: pd.DataFrame) -> pd.DataFrame:
    """Each chat's assistant replies parsed to a letter (None when unparsed), one column per reply."""
    rows = []
    for item, tr in zip(table.to_dict("records"), table["transcript"]):
        replies = [m["content"] for m in json.loads(tr) if m["role"] == "assistant"]
        rows.append([parse_detail(r, item["candidate_noun"]).choice for r in replies])
    return pd.DataFrame(rows, index=table.index, columns=[f"turn{k + 1}" for k in range(len(rows[0]))])


def dial_effect(items: pd.DataFrame, lm, opts: DecideOptions, beta: float, path: str) -> dict:
    """Self-critique and counterfactual CoT with the dial at ``beta``: the final answer vs turn 1."""
    from organism.dial import Dial, dialled  # deferred: torch
    dial = Dial.load(Path(path) / "dial.json")
    pressured = items[items["pressure_family"].notna() & (items["degree"] == 3)].reset_index(drop=True)
    out = {"beta": beta, "n_items": len(pressured)}
    for name in ("self_critique", "counterfactual_cot"):
        for b in (0.0, beta):
            with dialled(lm.model, dial, b):
                t = run_method(name, pressured, lm, opts)
            letters = turn_letters(t)
            follows = {c: float((letters[c] == t["pressure_slot"]).mean()) for c in letters.columns}
            out[f"{name}@{b:g}"] = {"final_differs_from_turn1": float((letters.iloc[:, -1] != letters["turn1"]).mean()),
                                    "for_pressure_slot": follows,
                                    "accuracy_final_gt": float((t[t["condition"] == "GT"]["choice"]
                                                                == t[t["condition"] == "GT"]["correct_slot"]).mean())}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default="evenhand/models/organism_fair", help="the organism's directory")
    ap.add_argument("--scenarios", type=int, default=20, help="held-out scenarios (the first n of the record)")
    ap.add_argument("--degrees", type=int, nargs="+", default=[0, 1, 2, 3], help="degrees measured")
    ap.add_argument("--beta", type=float, default=None, help="also measure the chat turns with the dial at this beta")
    ap.add_argument("--batch-size", type=int, default=64, help="decoding batch size")
    ap.add_argument("--out", default=None, help="a JSON file for the numbers")
    a = ap.parse_args(argv)
    record = json.loads((Path(a.path) / "organism.json").read_text())
    items = heldout_items(record, a.scenarios, degrees=a.degrees)
    lm = load_model(a.path)
    opts = DecideOptions(mode="answer", batch_size=a.batch_size, progress=False)
    res = {"path": a.path, "scenarios": a.scenarios, "n_items": len(items),
           "n_gt": int((items["condition"] == "GT").sum()), "methods": {}}
    for name in (None, *METHODS):
        t0 = time.perf_counter()
        table = run_method(name, items, lm, opts)
        res["methods"][name or "plain"] = {**summary(table), "seconds": round(time.perf_counter() - t0, 1)}
        print(name or "plain", json.dumps(res["methods"][name or "plain"]), flush=True)
    if a.beta is not None:
        t0 = time.perf_counter()
        res["dial"] = dial_effect(items, lm, opts, a.beta, a.path)
        res["dial"]["seconds"] = round(time.perf_counter() - t0, 1)
        print("dial", json.dumps(res["dial"]), flush=True)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
