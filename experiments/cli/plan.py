"""`evenhand plan CONFIG.yaml [--device H200]`: a run's GPU memory per stage, host memory, disk and time before
anything loads (:mod:`evenhand.models.plan`); a config that cannot fit is refused (exit 2). ``evenhand run`` makes
the same check against the free memory of the CUDA device it will use, before loading the model."""
from __future__ import annotations

import argparse
import dataclasses

from evenhand.models.plan import (DEVICES, FALLBACK_BATCH_SIZE, Device, Plan, Workload, auto_batch_size, model_config,
                                  plan, shapes_from_config)
from evenhand.support.options import read_yaml

CHARS_PER_TOKEN = 4.0
"""Prompt characters per token when the model's tokenizer is not on this machine (English prose; the chat
template adds :data:`TEMPLATE_TOKENS`)."""
TEMPLATE_TOKENS = 24


def run_configs(path: str) -> list:
    """The run configs of a config file (a run config, or each cell of a sweep of run configs)."""
    from experiments.studies import study_of
    from experiments.studies.run.config import RunConfig
    from experiments.studies.sweep import SweepConfig
    data = read_yaml(path)
    study = study_of(data)
    cfg = study.parse(data, str(path))
    if isinstance(cfg, SweepConfig):
        return [c for cell in cfg.cells for c in [study_of(cell.data).parse(cell.data)] if isinstance(c, RunConfig)]
    return [cfg] if isinstance(cfg, RunConfig) else []


def prompt_lengths(cfg) -> tuple[int, int, int]:
    """(items, longest prompt in tokens, mean prompt tokens) of a run config. The prompts are measured with the
    model's tokenizer when it is on this machine, else as characters / :data:`CHARS_PER_TOKEN` + the template's
    :data:`TEMPLATE_TOKENS`; a named subset of the generated suite is measured on its stratified ``smoke``
    sample (the same scenarios), its size from :func:`evenhand.suite.subsets.subset_size`."""
    import dataclasses

    from evenhand.suite.subsets import SUBSETS, subset_size
    from experiments.studies.run.config import suite_items
    s = cfg.suite
    if s.subset in SUBSETS:
        n = subset_size(s.subset)
        n = min(n, s.limit) if s.limit else n
        sample = suite_items(dataclasses.replace(s, subset="smoke", limit=None))
    else:
        sample = suite_items(s)
        n = len(sample)
    try:
        from evenhand.models.loading import preset_tokenizer
        from evenhand.vocab.prompts import model_text, user_message, uses_chat_template
        tok = preset_tokenizer(cfg.model.model)
        special = not uses_chat_template(tok)
        lens = [len(tok(model_text(tok, user_message(r, "answer")), add_special_tokens=special)["input_ids"])
                for r in sample.to_dict("records")]
    except Exception:  # noqa: BLE001 - no tokenizer here (an uncached preset): estimate from characters
        lens = [int(len(p) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS for p in sample["prompt"]]
    return n, max(lens), round(sum(lens) / len(lens))


def workload(cfg, n_items: int, longest: int, mean: int) -> Workload:
    """The :class:`~evenhand.models.plan.Workload` of a run config."""
    c = cfg.cache
    sites = 0
    if c.enabled:
        layers = shapes_from_config(model_config(cfg.model.model)).layers
        per = {"residual": layers + 1, "all": 4 * layers + 2}
        sites = sum(per.get(x, 1) for x in c.sites)
    return Workload(items=n_items, prompt_tokens=longest, mean_prompt_tokens=mean, mode=cfg.mode,
                    new_tokens={"logprob": 0, "answer": cfg.max_new_tokens,
                                "reasoning": cfg.reasoning_max_new_tokens}[cfg.mode],
                    batch_size=cfg.batch_size or FALLBACK_BATCH_SIZE, cache_sites=sites, cache_dtype=c.dtype,
                    cache_batch_size=c.batch_size, probe_rows=n_items if (c.enabled and cfg.probe) else 0)


def plan_config(cfg, device: Device, efficiency: float = 0.4) -> Plan:
    """The plan of one run config on ``device``."""
    dtype = None if cfg.model.dtype == "auto" else cfg.model.dtype
    if dtype is None and device.name == "CPU":
        dtype = "float32"
    shapes = shapes_from_config(model_config(cfg.model.model), dtype)
    work = workload(cfg, *prompt_lengths(cfg))
    if cfg.batch_size is None:  # what a run on this device would choose (evenhand.models.plan.default_batch_size)
        tokens = work.prompt_tokens + work.new_tokens
        bs = FALLBACK_BATCH_SIZE if device.name == "CPU" else auto_batch_size(device.memory, shapes, tokens)
        work = dataclasses.replace(work, batch_size=bs, cache_batch_size=cfg.cache.batch_size or FALLBACK_BATCH_SIZE)
    return plan(cfg.model.model, shapes, work, device, efficiency)


def cuda_device() -> Device | None:
    """The CUDA device a run will use, with its free memory now (None without CUDA; torch is imported only on a
    machine with an NVIDIA driver, so a failing command stays fast elsewhere)."""
    import os
    if not os.path.exists("/dev/nvidiactl") and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return None
    import torch
    if not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info()
    name = torch.cuda.get_device_name()
    known = next((d for k, d in DEVICES.items() if k.split("-")[0] in name), DEVICES["H100"])
    return Device(name, float(free), known.flops, known.bandwidth, f"{name}, {free / 1e9:.0f} GB free")


def refuse_unfit(path: str) -> None:
    """Raise ValueError (one line) when a run config of ``path`` cannot fit on this machine's CUDA device;
    nothing on a machine without CUDA, or for a model whose config.json is not here."""
    device = cuda_device()
    if device is None:
        return
    for cfg in run_configs(path):
        try:
            p = plan_config(cfg, device)
        except ValueError:
            continue
        why = p.refusal()
        if why:
            raise ValueError(f"{path}: {why} (evenhand plan {path})")


def _plan(a) -> int:
    cfgs = run_configs(a.config)
    if not cfgs:
        raise ValueError(f"{a.config}: evenhand plan reads run configs (and sweeps of them)")
    device = DEVICES[a.device]
    refused = []
    seen = set()
    for cfg in cfgs:
        key = (cfg.model, cfg.mode, cfg.batch_size, cfg.cache, cfg.suite)
        if key in seen:
            continue
        seen.add(key)
        p = plan_config(cfg, device, a.efficiency)
        print(p.table())
        print()
        if p.refusal():
            refused.append(p.refusal())
    if refused:
        raise ValueError(refused[0])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `plan` to the top-level subparsers ``sub``."""
    s = sub.add_parser("plan", help="predict a run config's GPU memory per stage, host memory, disk and time on a "
                                    "device before anything loads; refuse a config that cannot fit")
    s.add_argument("config", help="a run config (.yaml) or a sweep of run configs")
    s.add_argument("--device", default="H200", choices=list(DEVICES),
                   help="the device planned for (vendor datasheet numbers; default H200)")
    s.add_argument("--efficiency", type=float, default=0.4,
                   help="fraction of peak FLOP/s and bandwidth reached (default 0.4)")
    s.set_defaults(fn=_plan)
