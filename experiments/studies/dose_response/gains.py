"""The dial's gain under each arm of a dose-response run (:func:`.study.measured_gain`).

A diagnostic of *how* an arm changes the implanted gap: the last_layer dial adds ``beta <a, h> v`` to the
residual stream (the other mechanisms: docs/ORGANISM.md), so an arm can remove the gap by reading ``a`` out (the projection oracle: gain 0; the half oracle:
half the baseline's), by damping the
read (an edit that adds a large vector before the dial's layer shrinks the normalised ``h`` and with it
``<a, h>``), or by acting downstream on the answer. The gain (A-minus-B letter logit per unit beta, signed
by ``c``) is measured on the run's GT items (the mechanism's eval degree) with the arm's edit in both the undialled and the dialled
pass, the candidate noun declared the answer token as in decoding (so ``caa``'s edits at generated positions act
where they act when it decides). Prompt and conversation methods (no weight or activation edit) are not
measured (``measured`` says why).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from evenhand.models.loading import load_model
from organism.dials import load_mechanism
from evenhand.runs.rundir import RunDir, write_table_atomic
from interventions.base import EditingIntervention
from interventions.fitted import Fitted
from interventions.registry import get
from .items import item_sets
from .scoring import BASELINE, CONTROL_SUFFIX
from .study import ORACLE_ARMS, arm_names, measured_gain, oracle_for


def arm_gains(cfg, k: int | None = None, progress: bool = True) -> pd.DataFrame:
    """One row per arm of the run in ``cfg.output_dir`` (fits read from its ``fitted/``): the dial's gain at
    beta index ``k`` (default the largest), its standard error, its ratio to the baseline's gain, the item
    count, and ``measured`` ("yes" or why not). Written to the run's ``gains.csv``."""

    run = RunDir(cfg.output_dir)
    betas = run.manifest()["betas"]
    k = len(betas) - 1 if k is None else k
    if not 0 < k < len(betas) or not betas[k]:
        raise ValueError(f"beta index {k}: need a nonzero beta of the run ({betas})")
    lm = load_model(cfg.model)
    dial = load_mechanism(cfg.model, cfg.mechanism)
    _, ev = item_sets(cfg, json.loads((Path(cfg.model) / "organism.json").read_text()))
    ev = ev[ev["condition"] == "GT"]
    options = {m.name: m.options for m in cfg.methods}
    rows = []
    for arm in arm_names(cfg):
        under, why = None, "yes"
        if arm != BASELINE and arm not in ORACLE_ARMS:
            name = arm.removesuffix(CONTROL_SUFFIX)
            method = get(name)
            apply_opts = method.apply_options(method.split_options(options[name])[1])
            if not isinstance(method, EditingIntervention):
                why = "no: not an activation or weight edit (a prompt or conversation method)"
            else:
                fit = Fitted.load(run.fitted_dir(f"{name}@{k}"))
                if arm != name:
                    fit = method.random_control(fit, cfg.control_seed)

                def under(method=method, fit=fit, apply_opts=apply_opts):
                    return method.apply(fit, lm, apply_opts)
        if why != "yes":
            rows.append({"arm": arm, "beta": betas[k], "gain": None, "se": None, "n": 0, "measured": why})
            continue
        g, se, n = measured_gain(lm, dial, ev, betas[k], under, oracle_for(arm))
        rows.append({"arm": arm, "beta": betas[k], "gain": g, "se": se, "n": n, "measured": why})
        if progress:
            print(f"{arm}: gain {g:.5f} (SE {se:.5f}, n {n})", flush=True)
    table = pd.DataFrame(rows)
    base = table.loc[table["arm"] == BASELINE, "gain"].iloc[0]
    table["relative"] = table["gain"] / base
    write_table_atomic(run.gains_csv, table)
    return table
