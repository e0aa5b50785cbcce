"""Run a config on Ray: items sharded by a stable hash over actors that each load the model once.

``evenhand run CONFIG.yaml --backend ray [--address ADDR] [--workers N] [--gpus-per-worker G]``

- Items are split into ``workers x shards_per_worker`` shards by ``stable_hash(item_id)``; the shard of
  an item never depends on the number of items or on the order they come in.
- Each actor (``max_restarts`` > 0) loads the model once and decides whole shards; a shard's decisions
  go to their own directory ``OUT/decisions/ray-KKKK/decisions/`` (``RunDir.ray_shard``) as atomic batch files, so a shard that is
  retried after its worker died (Ray re-submits it: ``max_task_retries``) resumes where it stopped:
  nothing is duplicated or lost.
- When every shard is done the driver merges them in the items' order into ``responses.parquet``,
  scores them and writes the manifest exactly as a local run does (the activation cache, when enabled,
  runs on the driver). The merged decisions equal a local run's (tested on the organism).

Ray is an optional extra (``pip install -e .[ray]``); the local backend needs nothing of it.
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace

import pandas as pd

from evenhand.checks import warn_unparseable


def shard_of(item_id: str, n_shards: int) -> int:
    from evenhand.suite.generate import stable_hash
    return stable_hash("ray-shard", item_id) % n_shards


def _worker_class(ray, max_restarts: int, max_task_retries: int):
    @ray.remote(max_restarts=max_restarts, max_task_retries=max_task_retries)
    class DecideWorker:
        def __init__(self, spec: dict, threads: int):
            import os

            import torch

            from evenhand.models.loading import ModelSpec, load_model
            torch.set_num_threads(threads)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            self.lm = load_model(ModelSpec(**spec))

        def pid(self) -> int:
            import os
            return os.getpid()

        def decide_shard(self, records: list[dict], opts: dict, out_dir: str, delay: float = 0.0) -> int:
            from evenhand.decisions import DecideOptions, decide
            if delay:
                time.sleep(delay)
            table = decide(pd.DataFrame(records), self.lm, DecideOptions(**opts), out_dir=out_dir)
            return len(table)

    return DecideWorker


def run_config_ray(cfg, address: str | None = None, workers: int = 2, gpus_per_worker: float = 0.0,
                   shards_per_worker: int = 4, progress: bool = True, threads_per_worker: int = 1,
                   max_restarts: int = 3, _delay: float = 0.0, _on_started=None, _on_progress=None):
    """The Ray twin of :func:`experiments.runner.run_config`; returns (RunDir, metrics report)."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise RuntimeError("the ray backend needs Ray: pip install -e '.[ray]'") from exc
    from evenhand.decisions import DecideOptions
    from evenhand.models.loading import locate, resolve_spec, weights_fingerprint
    from evenhand.runs import RunDir
    from evenhand.shards import ParquetShards
    from evenhand.stages import LoadModel, StageReport, Step, finished_with, open_run, run_stages

    from .config import options_for
    from .runner import KEEP_STAGES, MAY_CHANGE, analysis_stages, check_output_dir, finish_stages, run_info, suite_items

    if workers < 1 or shards_per_worker < 1:
        raise ValueError("workers and shards_per_worker must be at least 1")
    out = check_output_dir(cfg.output_dir)
    spec = resolve_spec(cfg.model)
    where, gguf, source = locate(spec)
    opts = options_for(DecideOptions, cfg, chat_template=spec.chat_template, progress=False)
    items = suite_items(cfg.suite)
    n_shards = workers * shards_per_worker
    run = open_run(out, asdict(replace(cfg, model=spec)), MAY_CHANGE, KEEP_STAGES, **run_info(cfg, items),
                   backend={"name": "ray", "workers": workers, "gpus_per_worker": gpus_per_worker,
                            "shards": n_shards, "address": address})
    # the workers load the model; the driver fingerprints its files, as a local run does
    model = LoadModel(lambda: {"name": spec.model, "source": source, "spec": asdict(spec),
                               "weights": weights_fingerprint(where, gguf, spec.revision)},
                      describe=lambda desc: desc, name="model")

    def decide_on_ray(run: RunDir) -> pd.DataFrame:
        shard_ids = [shard_of(i, n_shards) for i in items["item_id"]]
        started_here = not ray.is_initialized()
        if started_here:
            kw = {"address": address} if address else {"num_cpus": workers * threads_per_worker,
                                                        "include_dashboard": False}
            ray.init(ignore_reinit_error=True, log_to_driver=False, **kw)
        try:
            Worker = _worker_class(ray, max_restarts, max_restarts)
            actors = [Worker.options(num_cpus=threads_per_worker, num_gpus=gpus_per_worker).remote(asdict(spec),
                                                                                                    threads_per_worker)
                      for _ in range(workers)]
            if _on_started is not None:
                _on_started(actors)
            records = items.to_dict("records")
            by_shard: dict[int, list[dict]] = {}
            for r, k in zip(records, shard_ids):
                by_shard.setdefault(k, []).append(r)
            pending = {}
            for j, (k, recs) in enumerate(sorted(by_shard.items())):
                d = run.ray_shard(k).path
                pending[actors[j % workers].decide_shard.remote(recs, asdict(opts), str(d), _delay)] = k
            done = 0
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                ray.get(ready[0])
                done += len(by_shard[pending.pop(ready[0])])
                if _on_progress is not None:
                    _on_progress(done, actors)
                if progress:
                    print(f"ray: {done:,}/{len(records):,} items", flush=True)
        finally:
            if started_here:
                ray.shutdown()
        # decide(out_dir=D) writes its batch files under D/decisions
        parts = [ParquetShards(shard.decisions).read_all() for shard in run.ray_shards()]
        table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        order = {iid: i for i, iid in enumerate(items["item_id"])}
        table = table[table["item_id"].isin(order)].drop_duplicates("item_id")
        table = table.assign(_o=table["item_id"].map(order)).sort_values("_o").drop(columns="_o").reset_index(drop=True)
        if len(table) != len(items):
            raise RuntimeError(f"ray run incomplete: {len(table)} of {len(items)} items decided")
        run.write_responses(table)
        warn_unparseable(table, run)
        return table

    def driver_model():
        from evenhand.models.loading import load_model
        return load_model(spec)
    decided = Step("decide", decide_on_ray, finished_with(lambda r: r.responses_path))
    score, *cache = finish_stages(cfg, spec, items, decided, driver_model, progress)
    run_stages(run, [model, decided, score, *cache, *analysis_stages(cfg, progress, items=items)],
               StageReport(f"ray run {cfg.output_dir}") if progress else None)
    return run, (score.result if score.result is not None else run.read_metrics())
