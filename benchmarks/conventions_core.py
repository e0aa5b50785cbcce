"""`score --convention ai2` against the independent re-implementation of Ai2's scorer, on a whole
simulated core run (the tests do the same on a ~3.6K-item part of it).

The simulated model (evenhand/models/simulated.py, default planted biases, ``--model-seed``) answers
every item of the core subset in text; then, for both contrast types, every metric of every cell of
``score(..., convention="ai2")`` (overall, by degree, category, domain, category x degree, and the
pressure metrics by pressure family) is compared with ``tests/reference_ai2.py``, and the default
report is compared with the ai2 one entry by entry (value, interval, n). Prints one JSON object:

    python benchmarks/conventions_core.py --suite 1     # about 4 minutes on one CPU core

Not part of the test run.
"""
from __future__ import annotations

import argparse
import json
import time

import pandas as pd

from evenhand.scoring.metrics import score
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import validate_rows
from evenhand.suite.content import load_content
from evenhand.suite.subsets import iter_subset
from tests import test_conventions as checks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subset", default="core")
    ap.add_argument("--model-seed", type=int, default=0)
    ap.add_argument("--suite", default=None, help="suite version (default: the current one)")
    a = ap.parse_args()
    t0 = time.time()
    content = load_content(a.suite)
    items = pd.DataFrame(list(iter_subset(a.subset, 0, content)))
    resp = SimulatedModel(PlantedBias(), seed=a.model_seed).decide(items)
    counted = checks.check_against_reference(resp)  # AssertionError naming the first cell and metric that differ
    differ = {}
    for ctype in ("type1", "type23"):
        df = validate_rows(resp[resp["contrast_type"] == ctype])
        ours, ai2 = score(df, resamples=5), score(df, resamples=5, convention="ai2")
        pairs = zip(checks.report_cells(ours), checks.report_cells(ai2))
        d = [(where, m) for (where, x), (_, y) in pairs for m in x if x[m] != y[m]]
        differ[ctype] = {"entries": len(d), "metrics": sorted({m for _, m in d}), "cells": sorted({w for w, _ in d})}
    negative = int((resp["question_polarity"] == "negative").sum())
    print(json.dumps({"suite": content.version, "items": len(resp), "negative_question_items": negative, "reference_values_equal": counted,
                      "default_vs_ai2_differ": differ, "seconds": round(time.time() - t0, 1)}, indent=1))


if __name__ == "__main__":
    main()
