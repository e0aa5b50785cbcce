"""`evenhand organism train | eval | items`: the model organism with planted biases."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .formatting import eval_text


def _organism_train(a) -> int:
    from dataclasses import replace

    from evenhand.models.organism import COMMITTED, Recipe, train
    from probes.organism import evaluate
    recipe = Recipe(seed=a.seed) if a.steps is None else replace(Recipe(seed=a.seed), steps=a.steps)
    out = Path(a.out) if a.out else COMMITTED
    record = train(recipe, out)
    print(f"trained in {record['train_seconds']:.0f}s ({record['parameters']:,} parameters, "
          f"{record['train_examples']:,} examples); final answer loss {record['curve'][-1]['loss']:.4f}; wrote {out}")
    if not a.no_eval:
        res = evaluate(out, n_scenarios=a.eval_scenarios)
        print(eval_text(res))
        record_eval(out, res)
    return 0


def record_eval(out: Path, res: dict) -> None:
    """Store a held-out evaluation in the organism's organism.json (without the probe's full table)."""
    f = out / "organism.json"
    rec = json.loads(f.read_text())
    rec["heldout_eval"] = {k: v for k, v in res.items() if k != "probe"} | {
        "probe": {k: v for k, v in res["probe"].items() if k != "table"}}
    f.write_text(json.dumps(rec, indent=1) + "\n")


def _organism_eval(a) -> int:
    from evenhand.models.organism import COMMITTED
    from probes.organism import evaluate
    path = Path(a.path) if a.path else COMMITTED
    res = evaluate(path, n_scenarios=a.scenarios, resamples=a.resamples)
    if a.record:
        record_eval(path, res)
    if a.json:
        print(json.dumps(res, indent=2, default=str))
    else:
        print(eval_text(res))
    return 0


def _organism_items(a) -> int:
    from evenhand.models.organism import COMMITTED, heldout_items
    from evenhand.runs import write_table_atomic
    record = json.loads((Path(a.path) if a.path else COMMITTED).joinpath("organism.json").read_text())
    items = heldout_items(record, a.scenarios, a.degrees, a.seed)
    out = Path(a.out)
    write_table_atomic(out, items)
    print(f"wrote {len(items):,} items of {items['scenario_id'].nunique()} held-out scenarios to {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `organism` command group to the top-level subparsers ``sub``."""
    org = sub.add_parser("organism", help="the model organism with planted biases").add_subparsers(
        dest="organism_command", required=True)
    s = org.add_parser("train", help="train it from its recipe (deterministic from --seed)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="default: the committed organism's directory")
    s.add_argument("--steps", type=int, default=None)
    s.add_argument("--eval-scenarios", type=int, default=None, help="held-out scenarios to evaluate (default all)")
    s.add_argument("--no-eval", action="store_true")
    s.set_defaults(fn=_organism_train)
    s = org.add_parser("eval", help="known-answer checks on held-out scenarios")
    s.add_argument("--path", default=None)
    s.add_argument("--scenarios", type=int, default=None)
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--json", action="store_true")
    s.add_argument("--record", action="store_true",
                   help="store the result in the organism's organism.json (as `organism train` does)")
    s.set_defaults(fn=_organism_eval)
    s = org.add_parser("items", help="write the matched item set of its held-out scenarios (.jsonl/.parquet)")
    s.add_argument("--out", required=True)
    s.add_argument("--path", default=None)
    s.add_argument("--scenarios", type=int, default=None)
    s.add_argument("--degrees", type=int, nargs="+", default=None)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(fn=_organism_items)
