"""Independent replications of the dose-response benchmark (``replicate: independent``; issue 18).

The false-positive rate at beta 0 and the coverage of a known removal are rates *over replications*; scored
on subsets of one decoded pool (:func:`interventions.dose_scoring.replicate`) the replications share items,
so the rates describe that pool rather than fresh samples. Here replication ``r`` draws everything afresh
from its own seed (:func:`replication_seed`): ``replication_scenarios`` held-out scenarios (domain-stratified),
their contrasts and names (:func:`interventions.dose_items.eval_items`), the per-scenario random effects
of the dial, and each random control's direction. The methods' fits are the main run's (one per beta).

Each replication decodes every arm at beta 0 (every arm's false-positive rate) and the baseline, the oracles
and the random controls at every beta (coverage and slopes of the arms with a known answer); cells go to
``replications/r<NN>/<arm>@<k>/responses.parquet``, so an interrupted run resumes cell by cell and processes
can share the replications (:func:`decode_replications`' ``shard``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .dose_items import eval_items
from .dose_scoring import BASELINE, DoseData, dose_data, known_removal

REPLICATION_STRIDE = 1000
"""Replication ``r`` draws with ``seed + REPLICATION_STRIDE * (r + 1)`` (the main run uses ``seed``)."""


def replication_seed(seed: int, r: int) -> int:
    """The seed of replication ``r`` of a run seeded ``seed`` (never the main run's)."""
    return seed + REPLICATION_STRIDE * (r + 1)


def known_arms(arms: list[str]) -> list[str]:
    """The baseline and the arms with a known answer (oracles, random controls), in ``arms``' order."""
    return [a for a in arms if a == BASELINE or known_removal(a) is not None]


def cell_path(out: Path, r: int, arm: str, k: int) -> Path:
    """Where replication ``r``'s cell of ``arm`` at beta index ``k`` is written."""
    return Path(out) / "replications" / f"r{r:02d}" / f"{arm}@{k}" / "responses.parquet"


def replication_cells(arms: list[str], n_betas: int) -> list[tuple[str, int]]:
    """The (arm, beta index) cells of one replication: every arm at 0, the known arms at every other beta."""
    return [(a, 0) for a in arms] + [(a, k) for k in range(1, n_betas) for a in known_arms(arms)]


REPLICATION_FILE = "replication.json"
"""In ``replications/``: the config fields that decide what a replication decodes."""


def check_replication_fields(cfg, out: Path, write: bool) -> None:
    """Refuse replications decoded with other fields than ``cfg``'s (``replications/replication.json``
    names the field); with ``write``, record them when none were recorded."""
    import json

    from evenhand.runs import write_json_atomic
    fields = {"replication_scenarios": cfg.replication_scenarios,
              "replication_conditions": list(cfg.replication_conditions), "eval_contrasts": cfg.eval_contrasts,
              "seed": cfg.seed, "control_seed": cfg.control_seed, "icc": cfg.icc}
    path = Path(out) / "replications" / REPLICATION_FILE
    if path.exists():
        stored = json.loads(path.read_text())
        for k, v in fields.items():
            if stored.get(k) != v:
                raise ValueError(f"{path}: the replications there were decoded with {k} {stored.get(k)!r}, the "
                                 f"config says {v!r} (config field {k!r}); use another output_dir")
    elif write:
        write_json_atomic(path, fields)


def decode_replications(dec, record: dict, arms: list[str], gains: list[float],
                        shard: tuple[int, int] | None = None) -> None:
    """Decode (or resume) the independent replications ``r < cfg.replications`` (with ``shard`` ``(i, n)``:
    those with ``r % n == i``) with ``dec`` (:class:`interventions.dose_response.CellDecoder`); a progress bar
    counts the cells."""
    from tqdm import tqdm

    from organism.calibration import scenario_multipliers

    cfg = dec.cfg
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ValueError(f"replication shard {shard[0]} of {shard[1]}: need 0 <= i < n")
    check_replication_fields(cfg, dec.out, write=True)
    todo = [r for r in range(cfg.replications) if shard is None or r % shard[1] == shard[0]]
    cells = replication_cells(arms, len(dec.betas))
    bar = tqdm(total=len(todo) * len(cells), desc="replications", unit="cell", disable=not dec.progress)
    for r in todo:
        seed = replication_seed(cfg.seed, r)
        items = eval_items(record, cfg.replication_scenarios, cfg.eval_contrasts, seed, cfg.replication_conditions)
        scen = sorted(items["scenario_id"].unique())
        mults = [scenario_multipliers(scen, cfg.icc, beta, gains[k] or 1.0, seed) for k, beta in enumerate(dec.betas)]
        for arm, k in cells:
            dec.decode(cell_path(dec.out, r, arm, k), arm, k, items, mults[k],
                       replication_seed(cfg.control_seed, r), log=False)
            bar.update()
    bar.close()


def replication_data(out: Path, arms: list[str], betas: list[float],
                     replications: int) -> list[tuple[DoseData, DoseData]]:
    """Per replication, ``(at_zero, known)`` for :func:`interventions.dose_scoring.replicate_independent`:
    every arm at beta 0, and the known arms at every beta. Raises FileNotFoundError naming the first cell
    not decoded (the fields they were decoded with are checked by :func:`check_replication_fields`)."""
    out_list = []
    known = known_arms(arms)
    for r in range(replications):
        responses = {}
        for arm, k in replication_cells(arms, len(betas)):
            path = cell_path(out, r, arm, k)
            if not path.exists():
                raise FileNotFoundError(f"{path}: replication {r} is not decoded (run without --only and "
                                        "--replication-shard to decode what is missing)")
            responses[(arm, k)] = pd.read_parquet(path)
        out_list.append((dose_data(responses, arms, betas[:1]), dose_data(responses, known, betas)))
    return out_list
