"""The run study's Ray backend: a run config on Ray, whole scenarios per shard, over actors that each load
the model once.

``evenhand run CONFIG.yaml --backend ray [--address ADDR] [--workers N] [--gpus-per-worker G]``

Ray is an optional extra (``pip install -e .[ray]``); the local backend needs nothing of it."""
from __future__ import annotations

import time
from dataclasses import asdict, replace

import pandas as pd

from evenhand.support.messages import warn_unparseable
from evenhand.running.shards import balanced_shards, shard_units
from evenhand.models.loading import ModelSpec, load_model
from evenhand.running.decisions import DecideOptions, decide
from evenhand.running.activations import CacheOptions, cache_activations
from evenhand.models.loading import locate, resolve_spec, weights_fingerprint
from evenhand.runs.rundir import RunDir
from evenhand.running.shards import ParquetShards
from evenhand.running.stages import LoadModel, StageReport, FnStage, finished_with, open_run, run_stages
from .local import KEEP_STAGES, MAY_CHANGE, analysis_stages, finish_stages, run_info
from .config import options_for, suite_items
from ..common import check_output_dir
from .config import RENAMED
from evenhand.running.activations import merge_caches


def shard_of(items: pd.DataFrame, n_shards: int, by: str = "scenario") -> list[int]:
    """The shard of each item of ``items``: whole units (:data:`evenhand.running.shards.SHARD_UNITS`), balanced.

    Items are split into ``workers x shards_per_worker`` shards by scenario (``by="scenario"``, the default;
    ``"baseline"``: scenario x contrast type; :func:`evenhand.running.shards.balanced_shards`): every item of a
    scenario goes to the same shard, so the items that share a prompt prefix, and each pressured item and its
    baseline, are decided (and cached) by one worker; the shards hold about the same number of items. The shard of
    an item depends on the run's items only, not on the order they come in."""
    return balanced_shards(shard_units(items, by), n_shards)


def _worker_class(ray, max_restarts: int, max_task_retries: int):
    """The actor class. Each actor (``max_restarts`` > 0) loads the model once and decides whole shards; a shard's
    decisions go to their own directory ``OUT/decisions/ray-KKKK/decisions/`` (``RunDir.ray_shard``) as atomic
    batch files, so a shard that is retried after its worker died (Ray re-submits it: ``max_task_retries``)
    resumes where it stopped: nothing is duplicated or lost."""
    @ray.remote(max_restarts=max_restarts, max_task_retries=max_task_retries)
    class DecideWorker:
        def __init__(self, spec: dict, threads: int):
            import os

            import torch

            torch.set_num_threads(threads)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            self.lm = load_model(ModelSpec(**spec))

        def pid(self) -> int:
            import os
            return os.getpid()

        def decide_shard(self, records: list[dict], opts: dict, out_dir: str, delay: float = 0.0) -> int:
            if delay:
                time.sleep(delay)
            table = decide(pd.DataFrame(records), self.lm, DecideOptions(**opts), out_dir=out_dir)
            return len(table)

        def cache_shard(self, records: list[dict], opts: dict, out_dir: str, suite_version: str | None,
                        backend: str) -> int:
            opts = dict(opts, sites=tuple(opts["sites"]), progress=False)
            return len(cache_activations(records, self.lm, CacheOptions(**opts), out_dir, suite_version,
                                         backend=backend).item_ids())

    return DecideWorker


class WorkerPool:
    """Ray (started here unless it already runs) and the model-holding actors, made on first use and
    shared by the decide and cache stages; :meth:`close` shuts down what was started here."""

    def __init__(self, ray, spec, address, workers, gpus_per_worker, threads_per_worker, max_restarts,
                 on_started):
        self.ray, self.spec, self.address, self.workers = ray, spec, address, workers
        self.gpus, self.threads, self.max_restarts, self.on_started = (gpus_per_worker, threads_per_worker,
                                                                       max_restarts, on_started)
        self.actors: list | None = None
        self.started_here = False

    def get(self) -> list:
        if self.actors is None:
            ray = self.ray
            if not ray.is_initialized():
                kw = {"address": self.address} if self.address else {"num_cpus": self.workers * self.threads,
                                                                      "include_dashboard": False}
                ray.init(ignore_reinit_error=True, log_to_driver=False, **kw)
                self.started_here = True
            Worker = _worker_class(ray, self.max_restarts, self.max_restarts)
            self.actors = [Worker.options(num_cpus=self.threads, num_gpus=self.gpus).remote(asdict(self.spec),
                                                                                           self.threads)
                           for _ in range(self.workers)]
            if self.on_started is not None:
                self.on_started(self.actors)
        return self.actors

    def run_shards(self, by_shard: dict[int, list[dict]], submit, on_done) -> None:
        """``submit(actor, k, records)`` for every shard (round robin over the actors, in shard order);
        ``on_done(k)`` as each finishes."""
        actors = self.get()
        pending = {submit(actors[j % len(actors)], k, recs): k for j, (k, recs) in enumerate(sorted(by_shard.items()))}
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            self.ray.get(ready[0])
            on_done(pending.pop(ready[0]))

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()
        self.actors, self.started_here = None, False


def gpus_for_workers(gpus_per_worker: float | None) -> float:
    """The GPUs each actor asks Ray for: ``gpus_per_worker`` when given, else one when this machine has CUDA and
    none otherwise (Ray then gives each actor its own device as ``cuda:0``, and schedules no more actors than
    there are GPUs)."""
    if gpus_per_worker is not None:
        if gpus_per_worker < 0:
            raise ValueError(f"gpus_per_worker must be at least 0, got {gpus_per_worker}")
        return float(gpus_per_worker)
    import torch
    return 1.0 if torch.cuda.is_available() else 0.0


def run_config_ray(cfg, address: str | None = None, workers: int = 2, gpus_per_worker: float | None = None,
                   shards_per_worker: int = 4, progress: bool = True, threads_per_worker: int = 1,
                   max_restarts: int = 3, shard_by: str = "scenario", _delay: float = 0.0, _on_started=None,
                   _on_progress=None):
    """The Ray twin of :func:`experiments.studies.run.local.run_config`; returns (RunDir, metrics report).

    ``shard_by`` says what a shard keeps whole (:data:`evenhand.running.shards.SHARD_UNITS`: ``scenario``,
    ``baseline`` or ``item``). ``gpus_per_worker`` (default: one when CUDA is present): :func:`gpus_for_workers`.

    When every shard is done the driver merges them in the items' order into ``responses.parquet``, scores them and
    writes the manifest exactly as a local run does. The merged decisions equal a local run's (tested on the
    organism)."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise RuntimeError("the ray backend needs Ray: pip install -e '.[ray]'") from exc


    if workers < 1 or shards_per_worker < 1:
        raise ValueError("workers and shards_per_worker must be at least 1")
    gpus_per_worker = gpus_for_workers(gpus_per_worker)
    out = check_output_dir(cfg.output_dir)
    spec = resolve_spec(cfg.model)
    where, gguf, source = locate(spec)
    opts = options_for(DecideOptions, cfg, chat_template=spec.chat_template, progress=False)
    items = suite_items(cfg.suite)
    n_shards = workers * shards_per_worker
    shard_ids = shard_of(items, n_shards, shard_by)
    run = open_run(out, asdict(replace(cfg, model=spec)), MAY_CHANGE, KEEP_STAGES, **run_info(cfg, items),
                   renamed=RENAMED,
                   backend={"name": "ray", "workers": workers, "gpus_per_worker": gpus_per_worker,
                            "shards": n_shards, "shard_by": shard_by, "address": address})
    # the workers load the model; the driver fingerprints its files, as a local run does
    model = LoadModel(lambda: {"name": spec.model, "source": source, "spec": asdict(spec),
                               "weights": weights_fingerprint(where, gguf, spec.revision)},
                      describe=lambda desc: desc, name="model")
    pool = WorkerPool(ray, spec, address, workers, gpus_per_worker, threads_per_worker, max_restarts, _on_started)
    records = items.to_dict("records")
    by_shard: dict[int, list[dict]] = {}
    for r, k in zip(records, shard_ids):
        by_shard.setdefault(k, []).append(r)

    def report(what: str):
        done = [0]

        def on_done(k: int) -> None:
            done[0] += len(by_shard[k])
            if _on_progress is not None:
                _on_progress(done[0], pool.actors)
            if progress:
                print(f"ray: {what} {done[0]:,}/{len(records):,} items", flush=True)
        return on_done

    def decide_on_ray(run: RunDir) -> pd.DataFrame:
        pool.run_shards(by_shard, lambda actor, k, recs: actor.decide_shard.remote(
            recs, asdict(opts), str(run.ray_shard(k).path), _delay), report("decided"))
        if not cfg.cache.enabled:
            pool.close()  # the workers are not needed by the stages after this one
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

    # The activation cache (when enabled) runs on the workers too, shard by shard, each into
    # OUT/activations/ray-KKKK/ (resumable like a local cache); the driver then gathers the parts into
    # OUT/activations/ (evenhand.running.activations.merge_caches: hard links, one index).
    def cache_on_ray(copts, out_dir, suite_version, backend):
        from pathlib import Path

        part = {k: Path(out_dir) / f"ray-{k:04d}" for k in by_shard}
        pool.run_shards(by_shard, lambda actor, k, recs: actor.cache_shard.remote(
            recs, asdict(copts), str(part[k]), suite_version, backend), report("cached"))
        pool.close()
        return merge_caches([part[k] for k in sorted(part)], out_dir, list(items["item_id"]))

    decided = FnStage("decide", decide_on_ray, finished_with(lambda r: r.responses_path))
    score, *cache = finish_stages(cfg, spec, items, decided, None, progress, cache_with=cache_on_ray)
    try:
        run_stages(run, [model, decided, score, *cache, *analysis_stages(cfg, progress, items=items)],
                   StageReport(f"ray run {cfg.output_dir}") if progress else None)
    finally:
        pool.close()
    return run, (score.result if score.result is not None else run.read_metrics())
