"""`evenhand run CONFIG.yaml`: a config of any registered study (its ``kind:``; a run config without one),
or a sweep of one, locally or on Ray."""
from __future__ import annotations

import argparse

from evenhand.support.options import read_yaml
from experiments.studies import study_of

from .common import progress, progress_flag


def _run(a) -> int:
    show = progress(a)
    data = read_yaml(a.config)
    study = study_of(data)
    if a.backend not in study.backends:
        raise ValueError(f"a {study.kind} config runs on the {' or '.join(study.backends)} backend, not {a.backend}")
    cfg = study.parse(data, str(a.config))
    from .plan import refuse_unfit  # before anything loads: a config that cannot fit on this GPU is refused
    refuse_unfit(a.config)
    ray_options = {"address": a.address, "workers": a.workers, "gpus_per_worker": a.gpus_per_worker}
    result = study.run(cfg, progress=show, backend=a.backend, **(ray_options if a.backend == "ray" else {}))
    text = study.text(cfg, result)
    if text:
        print(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `run` to the top-level subparsers ``sub``."""
    s = sub.add_parser("run", help="run a YAML config of any study (its kind:; a run config: suite -> decisions -> "
                                   "metrics (-> cache -> probes -> ablation -> figures)), or a sweep of one")
    s.add_argument("config", help="a config of any study (.yaml; experiments/configs/): its kind: names the study "
                                   "(run when absent); a sweep: field makes it a sweep")
    progress_flag(s)
    s.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="local (default) or ray: a run config's or a sweep's cells on Ray actors")
    s.add_argument("--address", default=None, help="ray: a cluster address (default: start a local one)")
    s.add_argument("--workers", type=int, default=2, help="ray: model-holding actors")
    s.add_argument("--gpus-per-worker", type=float, default=None,
                   help="ray: GPUs per actor (default: 1 when CUDA is present, else 0)")
    s.set_defaults(fn=_run)
