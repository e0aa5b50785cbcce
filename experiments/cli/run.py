"""`evenhand run CONFIG.yaml`: a run config, a comparison, a BBQ study, or a sweep of any of them,
locally or on Ray."""
from __future__ import annotations

import argparse

from .formatting import score_table
from .studies import bbq, run_comparison


def quiet_libraries() -> None:
    """Turn off the progress bars the model libraries draw themselves (loading weights, downloads)."""
    try:
        from huggingface_hub.utils import disable_progress_bars
        disable_progress_bars()
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _run(a) -> int:
    from experiments.config import read_yaml
    if a.quiet:
        quiet_libraries()
    from experiments.sweep import run_sweep, study_kind
    data = read_yaml(a.config)
    ray_options = {"address": a.address, "workers": a.workers, "gpus_per_worker": a.gpus_per_worker}
    if "sweep" in data:
        out, table = run_sweep(data, a.backend, progress=not a.quiet, ray_options=ray_options)
        print(f"sweep: {table['cell'].nunique()} cells, {len(table):,} rows in {out / 'sweep.parquet'} (+ .csv); "
              f"figures: `evenhand figures {out}`")
        return 0
    kind = study_kind(data)
    if kind != "run" and a.backend != "local":
        raise ValueError(f"a {kind} config runs on the local backend only")
    if kind == "bbq":
        return bbq(argparse.Namespace(config=a.config, no_progress=a.quiet))
    if kind == "compare":
        from experiments.studies.compare import parse_config
        return run_comparison(parse_config(data, str(a.config)), progress=not a.quiet)
    if kind == "dose":
        from experiments.studies.dose_response.study import parse_config as parse_dose
        from experiments.studies.dose_response.study import run_dose_response
        summary = run_dose_response(parse_dose(data, str(a.config)), progress=not a.quiet)
        print(summary.round(3).to_string(index=False))
        return 0
    from experiments.config import config_from_dict
    from experiments.runner import run_config
    cfg = config_from_dict(data)
    from evenhand.engine.registry import DEFAULT
    if a.backend == "ray" and cfg.engine != DEFAULT:
        raise ValueError(f"engine {cfg.engine} runs on the local backend (the Ray workers load Hugging Face models)")
    if a.backend == "ray":
        from experiments.ray_backend import run_config_ray
        run, report = run_config_ray(cfg, progress=not a.quiet, **ray_options)
    else:
        run, report = run_config(cfg, progress=not a.quiet)
    print(score_table(report))
    print(f"\nrun directory: {run.path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `run` to the top-level subparsers ``sub``."""
    s = sub.add_parser("run", help="run a YAML config: suite -> decisions -> metrics (-> cache -> probes -> "
                                   "ablation -> figures); a comparison config; or a sweep of either")
    s.add_argument("config", help="a run, comparison, dose-response, BBQ or sweep config (.yaml; experiments/configs/)")
    s.add_argument("--quiet", action="store_true", help="no progress bars and no stage headers (the results are still printed)")
    s.add_argument("--backend", default="local", choices=["local", "ray"],
                   help="local (default) or ray: a run config's or a sweep's cells on Ray actors")
    s.add_argument("--address", default=None, help="ray: a cluster address (default: start a local one)")
    s.add_argument("--workers", type=int, default=2, help="ray: model-holding actors")
    s.add_argument("--gpus-per-worker", type=float, default=0.0, help="ray: GPUs per actor")
    s.set_defaults(fn=_run)
