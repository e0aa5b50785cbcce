"""The IRT core's known-answer validation table (docs/IRT.md, "Validation"): on a simulated population over a
suite subset's real items, the fitted 2PL parameters against the planted ones (by the number of fitted models),
the IRT core against stratified random cores of the same size (Spearman with planted abilities of held-out
models), the coverage of adaptive 95% ability intervals, and what a smaller core costs the headline metrics
(agreement across models with the full set, CI width), with each part's wall time.

    OMP_NUM_THREADS=1 python benchmarks/bench_irt.py --out irt_bench.json"""
from __future__ import annotations

import argparse
import json
import os

from evenhand.irt.adaptive import AdaptiveOptions
from evenhand.irt.validation import (adaptive_coverage, compare_cores, core_wins, fitted_on_population,
                                     linking, metric_agreement, recovery, timed)
from evenhand.suite import items as suite_items


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subset", default="smoke", help="the suite subset whose items the population answers")
    p.add_argument("--train", type=int, nargs="+", default=[50, 100, 300, 1000],
                   help="numbers of simulated models to fit on (the recovery part)")
    p.add_argument("--fit-models", type=int, default=300,
                   help="simulated models the core, adaptive and agreement parts' fit is made on")
    p.add_argument("--sizes", type=int, nargs="+", default=[240, 300, 400], help="core sizes (items)")
    p.add_argument("--test", type=int, default=100, help="held-out models per replication of the core comparison")
    p.add_argument("--replications", type=int, default=20, help="replications of the core comparison")
    p.add_argument("--bootstrap", type=int, default=20,
                   help="bootstrap resamples of the core/adaptive fit (the SEs the shrunk discriminations need)")
    p.add_argument("--adaptive", type=int, default=500, help="simulated models tested adaptively")
    p.add_argument("--target-se", type=float, default=0.3, help="adaptive testing's stopping SE")
    p.add_argument("--budget", type=int, default=50, help="adaptive testing's item budget")
    p.add_argument("--agreement-models", type=int, default=100, help="models scored for the metrics' agreement")
    p.add_argument("--agreement-items", type=int, default=300, help="core size for the metrics' agreement")
    p.add_argument("--seed", type=int, default=0, help="seed of the population")
    p.add_argument("--out", default=None, help="write the table as JSON here")
    a = p.parse_args()
    items = suite_items(a.subset)
    out = {"subset": a.subset, "items": len(items), "gt_items": int((items["condition"] == "GT").sum()),
           "cpus": os.cpu_count(), "omp_threads": os.environ.get("OMP_NUM_THREADS"), "recovery": [], "cores": []}
    for n in a.train:
        (table, planted), s = timed(fitted_on_population, items, n, seed=a.seed)
        out["recovery"].append({"models": n, **recovery(table), "seconds": round(s, 1)})
        print(f"fit on {n:>5} models: {out['recovery'][-1]}", flush=True)
    (table, planted), s = timed(fitted_on_population, items, a.fit_models, seed=a.seed, bootstrap=a.bootstrap)
    out["fit_models"], out["bootstrap"] = a.fit_models, {"resamples": a.bootstrap, "seconds": round(s, 1)}
    for size in a.sizes:
        res, s = timed(compare_cores, table, planted, size, a.test, a.replications, seed=a.seed)
        row = {"items": size, "irt_spearman": res["irt"].mean(), "random_spearman": res["random"].mean(),
               "irt_rmse": res["irt_rmse"].mean(), "random_rmse": res["random_rmse"].mean(),
               "irt_better_share": float((res["gain"] > 0).mean()), "passes": core_wins(res), "seconds": round(s, 1)}
        out["cores"].append(row)
        print(f"core of {size} items: {row}", flush=True)
    out["linking"] = dict(zip(("A", "B"), linking(table)))
    print(f"fitted scale = A planted + B: {out['linking']}", flush=True)
    truth = table.assign(a=table["a_true"], b=table["b_true"], a_se=0.0, b_se=0.0)
    for which, t, m, disc in (("shrunk", table, 0, "shrunk"), ("fitted", table, 0, "fitted"),
                              ("fitted_min10", table, 10, "fitted"), ("planted", truth, 0, "shrunk")):
        opts = AdaptiveOptions(target_se=a.target_se, budget=a.budget, min_items=m, discrimination=disc)
        res, s = timed(adaptive_coverage, t, a.adaptive, opts, seed=a.seed)
        out[f"adaptive_{which}"] = {**res, "seconds": round(s, 1)}
        print(f"adaptive ({which}): {out[f'adaptive_{which}']}", flush=True)
    res, s = timed(metric_agreement, items, table, planted, a.agreement_models, a.agreement_items, seed=a.seed)
    out["agreement"] = {"seconds": round(s, 1), "rows": res.to_dict("records")}
    print(f"headline metrics on {a.agreement_models} models ({s:.0f} s):\n{res.round(3).to_string(index=False)}",
          flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=2, default=float)


if __name__ == "__main__":
    main()
