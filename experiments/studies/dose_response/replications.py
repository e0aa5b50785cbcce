"""Independent replications of the dose-response benchmark (``replicate: independent``).

The false-positive rate at beta 0 and the coverage of a known removal are rates *over replications*; scored
on subsets of one decoded pool (:func:`.scoring.replicate`) the replications share items,
so the rates describe that pool rather than fresh samples. Here replication ``r`` draws everything afresh
from its own seed (:func:`replication_seed`): ``replication_scenarios`` held-out scenarios (domain-stratified),
their contrasts and names (:func:`.items.eval_items`), the per-scenario random effects
of the dial, and each random control's direction. The methods' fits are the main run's (one per beta).

Each replication decodes every arm at beta 0 (every arm's false-positive rate) and the baseline, the oracles
and the random controls at every beta (coverage and slopes of the arms with a known answer); cells go to
``replications/r<NN>/<arm>@<k>/responses.parquet`` (:meth:`RunDir.replication_cell`); each replication is
one stage of the run (:class:`.study.DoseRun`), so an interrupted run resumes cell by cell and processes
can share the replications (``replication_shard``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from evenhand.runs.rundir import RunDir

from .items import eval_degree, eval_items
from .scoring import BASELINE, DoseData, dose_data, known_removal
from evenhand.runs.rundir import write_json_atomic
from organism.calibration import scenario_multipliers

REPLICATION_STRIDE = 1000
"""Replication ``r`` draws with ``seed + REPLICATION_STRIDE * (r + 1)`` (the main run uses ``seed``)."""


def replication_seed(seed: int, r: int) -> int:
    """The seed of replication ``r`` of a run seeded ``seed`` (never the main run's)."""
    return seed + REPLICATION_STRIDE * (r + 1)


def known_arms(arms: list[str]) -> list[str]:
    """The baseline and the arms with a known answer (oracles, random controls), in ``arms``' order."""
    return [a for a in arms if a == BASELINE or known_removal(a) is not None]


def cell_path(run: RunDir | Path, r: int, arm: str, k: int) -> Path:
    """Where replication ``r``'s cell of ``arm`` at beta index ``k`` is written in ``run``."""
    return _run(run).replication_cell(r, arm, k).responses_path


def _run(run: RunDir | Path) -> RunDir:
    return run if isinstance(run, RunDir) else RunDir(run)


def replication_cells(arms: list[str], n_betas: int) -> list[tuple[str, int]]:
    """The (arm, beta index) cells of one replication: every arm at 0, the known arms at every other beta."""
    return [(a, 0) for a in arms] + [(a, k) for k in range(1, n_betas) for a in known_arms(arms)]


def check_replication_fields(cfg, run: RunDir | Path, write: bool) -> None:
    """Refuse replications decoded with other fields than ``cfg``'s (the run's ``replications/replication.json``,
    :attr:`RunDir.replication_fields_path`, names the field); with ``write``, record them when none were recorded."""
    import json

    fields = {"replication_scenarios": cfg.replication_scenarios,
              "replication_conditions": list(cfg.replication_conditions), "eval_contrasts": cfg.eval_contrasts,
              "seed": cfg.seed, "control_seed": cfg.control_seed, "icc": cfg.icc}
    path = _run(run).replication_fields_path
    if path.exists():
        stored = json.loads(path.read_text())
        for k, v in fields.items():
            if stored.get(k) != v:
                raise ValueError(f"{path}: the replications there were decoded with {k} {stored.get(k)!r}, the "
                                 f"config says {v!r} (config field {k!r}); use another output_dir")
    elif write:
        write_json_atomic(path, fields)


def decode_replication(dec, record: dict, r: int, arms: list[str], gains: list[float]) -> None:
    """Decode (or resume) independent replication ``r`` with ``dec`` (:class:`.study.CellDecoder`), skipping its
    cells already written; a progress bar counts the cells."""
    from tqdm import tqdm


    cfg = dec.cfg
    cells = replication_cells(arms, len(dec.betas))
    seed = replication_seed(cfg.seed, r)
    items = eval_items(record, cfg.replication_scenarios, cfg.eval_contrasts, seed, cfg.replication_conditions,
                       eval_degree(cfg))
    scen = sorted(items["scenario_id"].unique())
    mults = [scenario_multipliers(scen, cfg.icc, beta, gains[k] or 1.0, seed) for k, beta in enumerate(dec.betas)]
    with tqdm(total=len(cells), desc=f"replication r{r:02d}", unit="cell", disable=not dec.progress) as bar:
        for arm, k in cells:
            dec.decode(dec.run.replication_cell(r, arm, k), arm, k, items, mults[k],
                       replication_seed(cfg.control_seed, r), log=False)
            bar.update()


def replication_data(run: RunDir | Path, arms: list[str], betas: list[float],
                     replications: int) -> list[tuple[DoseData, DoseData]]:
    """Per replication, ``(at_zero, known)`` for :func:`.scoring.replicate_independent`:
    every arm at beta 0, and the known arms at every beta. Raises FileNotFoundError naming the first cell
    not decoded (the fields they were decoded with are checked by :func:`check_replication_fields`)."""
    out_list = []
    known = known_arms(arms)
    for r in range(replications):
        responses = {}
        for arm, k in replication_cells(arms, len(betas)):
            path = cell_path(run, r, arm, k)
            if not path.exists():
                raise FileNotFoundError(f"{path}: replication {r} is not decoded (run without --only and "
                                        "--replication-shard to decode what is missing)")
            responses[(arm, k)] = pd.read_parquet(path)
        out_list.append((dose_data(responses, arms, betas[:1]), dose_data(responses, known, betas)))
    return out_list
