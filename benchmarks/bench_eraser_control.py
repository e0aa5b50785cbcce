"""Where an eraser and its relabelled control act on a dose-response run (a diagnostic of a control that removes).

    python benchmarks/bench_eraser_control.py experiments/configs/dose_response_mechanisms_fpr.yaml \
        --mechanism last_layer [--method ace] [--items 300] [--seed 0]

For the run of ``--mechanism`` (``<output_dir>/<mechanism>/``, scored: its manifest names the betas) and the
eraser's fit at the largest beta: per fitted site, the cosine of the real and the control direction with the
dial's push direction at the last layer (``v``) and the share of the fitting activations' variance on their first
principal component, and the class-1 rows by slot (``ace``'s paired concept), for the real fit, its control and
the control as it was before (a plain permutation of the rows' labels); then the dial's gain
(:func:`~experiments.studies.dose_response.study.measured_gain`, on the first ``--items`` GT items of the run's
evaluation set) as is and under each of the three, with the edit at every fitted layer, at each layer alone, and
at the prompt or generated positions alone; with ``--seeds N``, the same over the controls of N replications'
seeds (:func:`over_seeds`). Writes ``eraser_control_<method>.json`` in the run.
docs/results/dose_mechanisms.md, "Why ace's random control removes part of the gap", reads it."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np


def push_direction(mech) -> np.ndarray:
    """The dial's unit push direction at its last pushed layer (residual space)."""
    v = mech.v
    v = np.asarray(v[-1] if isinstance(v[0], (list, tuple)) else v, dtype=float)
    return v / np.linalg.norm(v)


def site_geometry(fit, v: np.ndarray) -> dict:
    """Per site: cos(direction, v), |cos(direction, first PC of the fitting activations)|, that PC's variance share,
    and the fitting activations' variance along ``v`` over their mean variance per direction (``v_variance_ratio``)."""
    out = {}
    for s in fit.info["sites"]:
        d = fit.tensors[f"{s}/direction"].double().numpy()
        d = d / np.linalg.norm(d)
        x = fit.tensors[f"{s}/fit_activations"].double().numpy()
        x = x - x.mean(0)
        _, sv, vt = np.linalg.svd(x, full_matrices=False)
        per_direction = float((sv ** 2).sum()) / x.shape[1]
        out[s] = {"cos_v": round(float(d @ v), 3), "abs_cos_pc1": round(float(abs(d @ vt[0])), 3),
                  "pc1_variance_share": round(float(sv[0] ** 2 / (sv ** 2).sum()), 3),
                  "v_variance_ratio": round(float(((x @ v) ** 2).sum()) / per_direction, 2)}
    return out


def class1_by_slot(fit) -> dict | None:
    """Class-1 rows in slot A and B under the fit's labels (paired ``demographic`` fits only; None otherwise)."""
    from interventions.steered import PAIR_STRATA
    if PAIR_STRATA not in fit.tensors:
        return None
    z, strata = fit.tensors["concept_labels"].numpy(), fit.tensors[PAIR_STRATA].numpy()
    slot_of_first = np.where(strata == 0, "A", "B")  # row 2i: item i's minority-coded candidate
    slots = np.stack([slot_of_first, np.where(slot_of_first == "A", "B", "A")], 1).reshape(-1)
    return {s: int(((z == 1) & (slots == s)).sum()) for s in ("A", "B")}


def plain_permutation_control(method, fit, seed: int):
    """The control as it was before the pairs were relabelled within slot strata: the eraser refitted on a plain
    permutation of the rows' labels (:func:`interventions.steered.relabelled`), for comparison."""
    from interventions.steered import relabelled
    z, _ = method.fitting_data(fit)
    return fit.replace_tensors(method.refit_tensors(fit, relabelled(z, seed)), "random")


def over_seeds(n: int, control_seed: int, method, fit, lm, mech, items, beta: float, v, run) -> dict:
    """Per replication ``r < n``, the control drawn with the seed that replication decodes with, and the plain
    permutation with the same seed: the dial's gain under each relative to no arm, |cos| of the last site's
    direction with ``v``; with the run's ``replications.parquet``, the replication's FragGap slope of the control
    and its Spearman correlation with the relative gain. ``summary``: means over the seeds (and the correlation)."""
    import pandas as pd
    from scipy.stats import spearmanr

    from experiments.studies.dose_response.replications import replication_seed
    from experiments.studies.dose_response.study import measured_gain
    base = measured_gain(lm, mech, items, beta)[0]
    last = fit.info["sites"][-1]
    slopes = {}
    if run.dose_replications_table.exists():
        t = pd.read_parquet(run.dose_replications_table)
        t = t[(t["arm"] == f"{method.name}-random") & (t["metric"] == "fraggap") & t["slope"].notna()]
        slopes = dict(zip(t["replication"], t["slope"]))
    rows = []
    for r in range(n):
        sd = replication_seed(control_seed, r)
        row = {"replication": r, "seed": sd, "slope": slopes.get(r)}
        controls = (("control", method.random_control(fit, sd)), ("plain", plain_permutation_control(method, fit, sd)))
        for name, f in controls:
            d = f.tensors[f"{last}/direction"].double().numpy()
            row[f"{name}_abs_cos_v"] = round(float(abs(d @ v) / np.linalg.norm(d)), 4)
            row[f"{name}_relative_gain"] = round(measured_gain(lm, mech, items, beta,
                                                              lambda f=f: method.apply(f, lm, method.ApplyOptions()))[0]
                                                 / base, 4)
        rows.append(row)
        print(f"r{r:02d} seed {sd}: " + ", ".join(f"{k} {row[k]}" for k in row if k.endswith(("cos_v", "gain"))),
              flush=True)
    x = pd.DataFrame(rows)
    means = {f"mean_{c}": round(float(x[c].mean()), 4) for c in x if c.endswith(("cos_v", "gain"))}
    summary = {"seeds": n, "site": last, **means}
    with_slope = x.dropna(subset=["slope"])
    if len(with_slope) > 2:
        rho, p = spearmanr(with_slope["slope"], with_slope["control_relative_gain"])
        summary["spearman_slope_vs_control_gain"] = {"rho": round(float(rho), 3), "p": round(float(p), 4),
                                                     "n": len(with_slope)}
    return {"rows": rows, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="the dose_response config of the run (experiments/configs/dose_response*.yaml)")
    ap.add_argument("--mechanism", required=True,
                    help="the dial mechanism whose run (<output_dir>/<mechanism>) to read")
    ap.add_argument("--output-dir", help="the directory of the per-mechanism runs (default the config's output_dir)")
    ap.add_argument("--method", default="ace", choices=("ace",), help="the eraser: ace (a direction per site; "
                    "leace's oblique projections have no one direction to compare)")
    ap.add_argument("--items", type=int, default=300,
                    help="GT evaluation items the gains are measured on (default 300)")
    ap.add_argument("--seed", type=int, help="the control's seed (default the config's control_seed)")
    ap.add_argument("--seeds", type=int, default=0, help="also the controls of the first N replications' seeds: "
                    "each one's relative gain and last-site |cos| with v, against the replication's slope (default 0)")
    args = ap.parse_args(argv)

    from evenhand.models.loading import load_model
    from evenhand.runs.rundir import RunDir, write_json_atomic
    from experiments.studies.dose_response.items import item_sets
    from experiments.studies.dose_response.study import load_config, measured_gain
    from interventions.fitted import Fitted
    from interventions.registry import get
    from organism.dials import load_mechanism

    cfg = load_config(args.config)
    runs = args.output_dir or cfg.output_dir
    cfg = replace(cfg, mechanism=args.mechanism, output_dir=str(Path(runs) / args.mechanism))
    run = RunDir(cfg.output_dir)
    if not run.manifest_path.exists():
        ap.error(f"{run.manifest_path}: the run is not scored (run bench_dose_response.py on it first)")
    betas = run.manifest()["betas"]
    k = len(betas) - 1
    method = get(args.method)
    fit_dir = run.fitted_dir(f"{args.method}@{k}")
    if not Path(fit_dir).exists():
        ap.error(f"{fit_dir}: no {args.method} fit in the run (--method names an arm of the config)")
    fit = Fitted.load(fit_dir)
    seed = cfg.control_seed if args.seed is None else args.seed
    control = method.random_control(fit, seed)
    plain = plain_permutation_control(method, fit, seed)
    lm, mech = load_model(cfg.model), load_mechanism(cfg.model, args.mechanism)
    v = push_direction(mech)
    out = {"mechanism": args.mechanism, "method": args.method, "beta": betas[k], "control_seed": seed,
           "geometry": {"real": site_geometry(fit, v), "control": site_geometry(control, v),
                        "plain_permutation": site_geometry(plain, v)},
           "class1_by_slot": {"real": class1_by_slot(fit), "control": class1_by_slot(control),
                              "plain_permutation": class1_by_slot(plain)},
           "random_direction_abs_cos": round(float(np.sqrt(2 / np.pi / len(v))), 3)}
    print(json.dumps(out, indent=1), flush=True)
    _, ev = item_sets(cfg, json.loads((Path(cfg.model) / "organism.json").read_text()))
    ev = ev[ev["condition"] == "GT"].head(args.items)
    layers = sorted({int(s.split(".")[1]) for s in fit.info["sites"]})
    gains = []
    opts = method.ApplyOptions

    def gain(label, under=None):
        t = time.time()
        g, se, n = measured_gain(lm, mech, ev, betas[k], under)
        gains.append({"under": label, "gain": round(g, 5), "se": round(se, 5), "n": n})
        print(f"{label:36s} gain {g:.5f} (SE {se:.5f}, n {n}; {time.time() - t:.0f} s)", flush=True)

    gain("no arm")  # every arm: the gain with the edit at every fitted layer, then at each alone, then by positions
    for name, f in ((args.method, fit), (f"{args.method}-random", control), ("plain permutation", plain)):
        gain(name, lambda f=f: method.apply(f, lm, opts()))
        for lay in layers:
            gain(f"{name} at layer {lay} only", lambda f=f, lay=lay: method.apply(f, lm, opts(at_layers=lay)))
        for pos in ("prompt", "generated"):
            gain(f"{name} at {pos} positions only", lambda f=f, pos=pos: method.apply(f, lm, opts(positions=pos)))
    out["gains"] = gains
    if args.seeds:
        out["over_seeds"] = over_seeds(args.seeds, seed, method, fit, lm, mech, ev, betas[k], v, run)
        print(json.dumps(out["over_seeds"]["summary"], indent=1), flush=True)
    path = Path(cfg.output_dir) / f"eraser_control_{args.method}.json"
    write_json_atomic(path, out)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
