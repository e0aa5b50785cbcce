"""Residual-stream cache at the decision point, read by a backend: nnsight (default), TransformerLens or hooks.

For each item the model reads the prompt (the answer variant, chat template
applied) and the cache keeps, at the last prompt token (the token after which
the model answers), the value of every requested site (default: ``embed`` and
every ``blocks.{L}.resid_post``), read inside one ``nnsight`` trace with
``logits_to_keep=1``. With ``name_mean`` it also keeps, for items that carry
names, the mean over the tokens of each candidate's name (``SITE@name_A``,
``SITE@name_B``; NaN rows elsewhere).

Storage: ``OUT/activations/acts-NNNNN.safetensors`` shards (one tensor per site, item ids in the
shard's metadata), ``manifest.json`` (model, sites, storage dtype, suite version, width), ``index.json``
when complete; resumable. Stored in bfloat16 for a bfloat16 model, else float32 (never float16); a NaN or
inf stops the cache naming site and item. Read as float32 one site at a time (docs/GUIDE.md, "Cache").
Batches, out-of-memory halving and the copy to the host: :mod:`evenhand.engine.reader`."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pandas as pd

from ..engine.batching import left_pad, plan_batches, plan_equal_length, token_lengths
from ..engine.reader import hook_runner, host_rows, read
from ..models.loading import LoadedModel
from ..models.sites import expand, module, resolve
from ..vocab.prompts import ChatTemplate, model_text, user_message, uses_chat_template
from ..runs.rundir import RunDir
from .shards import ShardDir, read_json, write_json
from .stages import report_progress

Backend = Literal["nnsight", "transformer_lens", "hooks"]
"""What reads the activations (``backend``): nnsight (one trace of the Hugging Face model), TransformerLens, or
forward hooks (:func:`evenhand.engine.reader.hook_runner`, what fitting and interventions read with); the same
values (tests/test_reader.py)."""
BACKENDS = get_args(Backend)
CacheDtype = Literal["auto", "bfloat16", "float32"]
"""The storage dtype of a cache (module docstring): auto (the model's bfloat16, else float32), bfloat16, float32."""
STORED_DTYPES = ("bfloat16", "float32", "float16")
"""The dtypes a cache on disk may hold (float16: caches written before bfloat16, read only)."""
_ORDER = {"resid_pre": 0, "attn_out": 1, "mlp_out": 2, "resid_post": 3}


@dataclass(frozen=True)
class CacheOptions:
    """What to cache and how."""
    sites: tuple[str, ...] = ("residual",)
    """Site names or shorthands: residual (embed + every resid_post), all."""
    batch_size: int = 8
    """Items per traced forward pass."""
    dtype: CacheDtype = "auto"
    """Storage dtype: auto | bfloat16 | float32. auto: bfloat16 for a bfloat16 model, float32 otherwise
    (never float16, whose range a residual stream can exceed)."""
    name_mean: bool = False
    """Also keep the mean over each candidate's name tokens (items with names only)."""
    chat_template: ChatTemplate = "auto"
    """auto | none, as for decisions."""
    progress: bool = True
    """Show a progress bar."""
    progress_label: str = ""
    """What the progress bar says the cache is for (``ablation label``), before ``cache[backend]``."""

    def __post_init__(self):
        if self.dtype not in get_args(CacheDtype):
            raise ValueError(f"cache dtype must be auto, bfloat16 or float32, got {self.dtype!r}"
                             + (" (float16 overflows above 65,504, which residual streams exceed)"
                                if self.dtype == "float16" else ""))


class NonFiniteActivation(ValueError):
    """A cached value is NaN or infinite (or overflows the storage dtype): the message names the site and item."""


def storage_dtype(requested: str, model_dtype) -> str:
    """The dtype a cache stores for ``requested`` (:data:`CacheDtype`) and a model computing in
    ``model_dtype`` (a torch dtype or its name): ``auto`` is bfloat16 for a bfloat16 model, float32 otherwise."""
    if requested != "auto":
        return requested
    return "bfloat16" if str(model_dtype).replace("torch.", "") == "bfloat16" else "float32"


def storage_tensors(rows: list[dict], keys: list[str], item_ids: list[str], dtype: str) -> dict:
    """One batch's rows (:func:`host_rows`) as one torch tensor per key in the storage ``dtype``, checked:
    raises :class:`NonFiniteActivation` naming the first site and item holding a NaN or infinite value
    after the cast (a value the dtype cannot hold becomes inf). A name-mean site (``SITE@name_A``) may hold
    all-NaN rows: the items without a name."""
    import torch
    out = {}
    for k in keys:
        t = torch.from_numpy(np.stack([r[k] for r in rows])).to(getattr(torch, dtype))
        bad = ~torch.isfinite(t)
        if "@name_" in k:
            bad &= ~torch.isnan(t).all(1, keepdim=True)
        if bool(bad.any()):
            i, j = (int(v) for v in bad.nonzero()[0])
            raw = float(rows[i][k][j])
            what = (f"{raw:g} does not fit {dtype}" if np.isfinite(raw) else f"the model gave {raw:g}")
            raise NonFiniteActivation(f"activation cache: site {k!r}, item {item_ids[i]!r}: non-finite value at "
                                      f"dimension {j} ({what}); nothing of this batch was written")
        out[k] = t
    return out


def execution_order(site: str) -> tuple:
    """Sort key: the order in which a forward pass reaches each site (nnsight needs it)."""
    if site == "embed":
        return (-1, 0)
    if site == "ln_final":
        return (10**9, 0)
    m = re.match(r"blocks\.(\d+)\.(\w+)$", site)
    return (int(m.group(1)), _ORDER[m.group(2)])


def name_weights(tokenizer, texts: list[str], items: list[dict], width: int, lengths: list[int]):
    """(B, width) weights averaging each slot's name tokens, or None for items without names."""
    import torch
    out = {"A": torch.zeros(len(texts), width), "B": torch.zeros(len(texts), width)}
    has = [False] * len(texts)
    for i, (text, item) in enumerate(zip(texts, items)):
        names = item.get("names")
        if not isinstance(names, dict):
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
        shift = width - len(offsets)  # left padding (and any leading special tokens) come before the text
        for slot in ("A", "B"):
            name = names.get(slot)
            anchor = f"{item['candidate_noun']} {slot}, "
            start = text.find(anchor + name) if name else -1
            if start < 0:
                continue
            lo = start + len(anchor)
            hi = lo + len(name)
            toks = [j for j, (a, b) in enumerate(offsets) if a < hi and b > lo and b > a]
            for j in toks:
                out[slot][i, shift + j] = 1.0 / len(toks)
            has[i] = has[i] or bool(toks)
    return out, has


class ActivationCache:
    """Read a cache directory: ``load(site)`` -> (item_ids, float32 array)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.manifest = read_json(RunDir(self.path).manifest_path)
        self._shards = ShardDir(self.path, "acts", "safetensors")

    @property
    def sites(self) -> list[str]:
        return self.manifest["stored_sites"]

    @property
    def dtype(self) -> str:
        """The storage dtype recorded in the manifest (bfloat16, float32; float16 in older caches)."""
        return self.manifest["dtype"]

    def _layout(self) -> list[tuple[Path, list[str]]]:
        """Every shard with the item ids it holds, in order (from the shards' headers only)."""
        from safetensors import safe_open
        out = []
        for p in self._shards.shards():
            with safe_open(p, framework="pt") as f:
                out.append((p, json.loads(f.metadata()["item_ids"])))
        return out

    @staticmethod
    def _read(path: Path, site: str) -> np.ndarray:
        """One shard's matrix of ``site`` as float32 (bfloat16 is read through torch: numpy has none)."""
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            return f.get_tensor(site).float().numpy()

    def item_ids(self) -> list[str]:
        return [k for _, ids in self._layout() for k in ids]

    def load(self, site: str, item_ids: list[str] | None = None) -> tuple[list[str], np.ndarray]:
        """(item ids, float32 matrix) of ``site``, in the cache's order or ``item_ids``' (the last copy of an
        item cached twice). The matrix is allocated once and filled shard by shard: memory is one site's
        matrix and one shard, whatever the number of sites."""
        if site not in self.sites:
            raise KeyError(f"site {site!r} is not in this cache; cached: {', '.join(self.sites)}")
        layout = self._layout()
        ids = [k for _, part in layout for k in part]
        starts = np.cumsum([0] + [len(part) for _, part in layout])
        if item_ids is None:
            mat = np.empty((len(ids), self.manifest["d_model"]), np.float32)
            for j, (p, _) in enumerate(layout):
                mat[starts[j]:starts[j + 1]] = self._read(p, site)
            return ids, mat
        pos = {k: j for j, k in enumerate(ids)}
        missing = [k for k in item_ids if k not in pos]
        if missing:
            raise KeyError(f"{len(missing)} item ids are not in the cache, e.g. {missing[0]!r}")
        want = np.array([pos[k] for k in item_ids], dtype=np.int64)
        shard = np.searchsorted(starts, want, side="right") - 1
        mat = np.empty((len(want), self.manifest["d_model"]), np.float32)
        for j in np.unique(shard):
            rows = np.flatnonzero(shard == j)
            mat[rows] = self._read(layout[j][0], site)[want[rows] - starts[j]]
        return list(item_ids), mat


TL_HOOKS = {"embed": "hook_embed", "ln_final": "ln_final.hook_normalized", "resid_pre": "hook_resid_pre",
            "resid_post": "hook_resid_post", "attn_out": "hook_attn_out", "mlp_out": "hook_mlp_out"}


def tl_hook_name(site: str) -> str:
    """Our site name -> the TransformerLens hook name it corresponds to."""
    m = re.match(r"blocks\.(\d+)\.(\w+)$", site)
    return f"blocks.{m.group(1)}.{TL_HOOKS[m.group(2)]}" if m else TL_HOOKS[site]


def cache_activations(items: pd.DataFrame | list[dict], lm: LoadedModel, opts: CacheOptions = CacheOptions(),
                      out_dir: str | Path = "activations", suite_version: str | None = None,
                      backend: str = "nnsight") -> ActivationCache:
    """Cache the requested sites at the decision token for every item (resumable).

    ``backend="nnsight"`` (default) reads every site in one trace of the Hugging Face model;
    ``backend="hooks"`` reads the same values with forward hooks, in the same batches (no ``name_mean``).
    ``backend="transformer_lens"`` boots a TransformerLens ``TransformerBridge`` on its own copy of
    the model and stores the same values under TransformerLens hook names
    (``hook_embed``, ``blocks.{L}.hook_resid_post``, ...); it batches only prompts of equal
    token length, since the bridge does not reproduce Hugging Face's padded forward."""
    from tqdm.auto import tqdm

    if backend not in BACKENDS:
        raise ValueError(f"backend must be nnsight, transformer_lens or hooks, got {backend!r}")
    if backend != "nnsight" and opts.name_mean:
        raise ValueError("name_mean is available with the nnsight backend only")
    records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
    out = Path(out_dir)
    sites = sorted(expand(lm.model, list(opts.sites)), key=execution_order)
    resolved = [resolve(lm.model, s) for s in sites]
    keys = [tl_hook_name(s) for s in sites] if backend == "transformer_lens" else sites
    stored = list(keys) + ([f"{s}@name_{slot}" for s in sites for slot in "AB"] if opts.name_mean else [])
    dtype = storage_dtype(opts.dtype, next(lm.model.parameters()).dtype)
    manifest = {"model": lm.describe(), "sites": sites, "stored_sites": stored, "dtype": dtype,
                "position": "last prompt token", "suite_version": suite_version, "options": asdict(opts),
                "d_model": int(lm.model.config.get_text_config().hidden_size), "backend": backend}
    shards = ShardDir(out, "acts", "safetensors")
    shards.prepare()
    mpath = RunDir(out).manifest_path
    if mpath.exists():
        old = read_json(mpath)
        if old["stored_sites"] != stored or old["dtype"] != dtype or old["model"]["name"] != lm.name:
            what = ("dtype " + old["dtype"] + f" (this cache stores {dtype})" if old["dtype"] != dtype
                    else "sites, backend or model")
            raise ValueError(f"{out} already holds a cache of other {what}; use another directory")
    write_json(mpath, manifest)
    done = set(ActivationCache(out).item_ids())
    todo = [r for r in records if r["item_id"] not in done]
    special = not uses_chat_template(lm.tokenizer, opts.chat_template)
    texts = [model_text(lm.tokenizer, user_message(r, "answer"), opts.chat_template) for r in todo]
    lengths = token_lengths(lm.tokenizer, texts, special)
    if backend == "transformer_lens":
        runner, batches = nullcontext(_tl_runner(lm, texts, special, keys)), plan_equal_length(lengths, opts.batch_size)
    elif backend == "hooks":
        seqs = [lm.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
        runner = hook_runner(lm.model, lm.tokenizer.pad_token_id, seqs, sites, lambda h, idx: h[:, -1])
        batches = plan_batches(lengths, opts.batch_size)
    else:
        runner, batches = nullcontext(nnsight_runner(lm, texts, todo, special, resolved, opts)), plan_batches(
            lengths, opts.batch_size)
    bar = tqdm(total=len(records), initial=len(done), unit="item", disable=not opts.progress,
               desc=" ".join(filter(None, (opts.progress_label, f"cache[{backend}]"))), dynamic_ncols=True)
    from safetensors.torch import save_file

    def write(idx: list[int], rows: list[dict]) -> None:
        batch_ids = [todo[i]["item_id"] for i in idx]
        arrays = storage_tensors(rows, stored, batch_ids, dtype)
        meta = {"item_ids": json.dumps(batch_ids)}
        shards.atomic_write(lambda tmp: save_file(arrays, tmp, metadata=meta))
        bar.update(len(idx))
        report_progress(bar.n, bar.total)  # the run's time left in this stage

    with runner as run:
        read(run, batches, opts.batch_size, write)
    bar.close()
    cache = ActivationCache(out)
    ids = cache.item_ids()
    if {r["item_id"] for r in records} <= set(ids):
        write_json(RunDir(out).cache_index_path, {"n_items": len(ids), "item_ids": ids})
    return cache


def merge_caches(parts: list[str | Path], out: str | Path, item_ids: list[str]) -> ActivationCache:
    """Gather caches written in parts (one directory each, e.g. one per Ray shard) into one cache at ``out``.

    Each part's shard files become ``out``'s shards, part after part (hard links, copies where a link is
    not possible), under the first part's manifest; ``index.json`` is written once every one of ``item_ids``
    is there, and then the part directories are removed. The parts must hold the same sites, dtype and
    model. Re-running a merge that was cut short starts it again (``out``'s own shard files are replaced)."""
    import os
    import shutil
    out = Path(out)
    caches = [ActivationCache(p) for p in parts]
    if not caches:
        raise ValueError("no cache parts to merge")
    first = caches[0].manifest
    for c in caches[1:]:
        m = c.manifest
        if (m["stored_sites"], m["dtype"], m["model"]["name"]) != (first["stored_sites"], first["dtype"],
                                                                  first["model"]["name"]):
            raise ValueError(f"cache part {c.path} holds other sites, dtype or model than {caches[0].path}")
    merged = ShardDir(out, "acts", "safetensors")
    merged.prepare()
    for p in merged.shards():
        p.unlink()
    RunDir(out).cache_index_path.unlink(missing_ok=True)
    write_json(RunDir(out).manifest_path, first)
    for c in caches:
        for src in ShardDir(c.path, "acts", "safetensors").shards():
            target = merged.next_path()
            try:
                os.link(src, target)
            except OSError:
                merged.atomic_write(lambda tmp, src=src: shutil.copyfile(src, tmp))
    cache = ActivationCache(out)
    ids = cache.item_ids()
    if set(item_ids) <= set(ids):
        write_json(RunDir(out).cache_index_path, {"n_items": len(ids), "item_ids": ids})
        for c in caches:
            shutil.rmtree(c.path)
    return cache


def nnsight_runner(lm: LoadedModel, texts: list[str], todo: list[dict], special: bool, resolved: list,
                   opts: CacheOptions) -> Callable[[list[int]], list[dict]]:
    """The nnsight backend, a runner of :func:`evenhand.engine.reader.read`: it runs ``texts[idx]``
    left-padded through an nnsight trace and returns, per text, each resolved site's activation at
    the last token (and the name means when ``opts.name_mean``) as float32 arrays."""
    from nnsight import TransformersModel
    traced = TransformersModel(lm.model, tokenizer=lm.tokenizer)

    def run(idx: list[int]) -> list[dict]:
        enc = [lm.tokenizer(texts[i], add_special_tokens=special)["input_ids"] for i in idx]
        ids, mask, pos = left_pad(enc, lm.tokenizer.pad_token_id, lm.model.device)
        weights = None
        if opts.name_mean:
            weights, _ = name_weights(lm.tokenizer, [texts[i] for i in idx], [todo[i] for i in idx], ids.shape[1],
                                      [len(e) for e in enc])
            weights = {k: v.to(lm.model.device) for k, v in weights.items()}
        with traced.trace(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1):
            saved = trace_body(traced, resolved, weights)
        return host_rows(dict(saved))

    return run


def boot_bridge(lm: LoadedModel):
    """A TransformerLens TransformerBridge on a structural copy of the model that shares its weights.

    The bridge rewrites the module tree it is given and switches its attention to eager, so it gets its own
    tree (modules and config copied) whose parameters and buffers are the loaded model's own tensors: no second
    copy of the weights (+24 GB at 12B with a deep copy), and ``lm.model`` keeps its modules and attention. The
    bridge is named by the model's local directory (``lm.meta["path"]``), never a hub id, so booting it reads
    nothing from the hub (its config comes from the model; its tokenizer is ``lm.tokenizer``). It boots without
    a multimodal processor (:func:`text_only_bridge`)."""
    import copy

    from transformer_lens.model_bridge import TransformerBridge
    shared = {id(t): t for t in list(lm.model.parameters()) + list(lm.model.buffers())}
    model = copy.deepcopy(lm.model, memo=shared)
    if not getattr(model.config, "architectures", None):
        model.config.architectures = [type(model).__name__]
    with text_only_bridge():
        return TransformerBridge.boot_transformers(lm.meta.get("path") or lm.spec.model, hf_model=model,
                                                   tokenizer=lm.tokenizer)


@contextmanager
def text_only_bridge():
    """While TransformerLens boots a bridge, it loads no modality processor.

    TransformerLens 4.3 loads a multimodal model's ``AutoProcessor`` (Gemma3ForConditionalGeneration, the class
    gemma-3-12b-it loads as) and, when that fails without torchvision, runs ``pip install torchvision`` from
    inside the boot: on a CPU machine that replaced the CPU torch with a CUDA build. The cache hands the bridge
    token ids of text only, so the processor is never needed: its loader is a no-op for the boot."""
    from transformer_lens.model_bridge.sources.transformers import source
    loader = source.load_modality_processor
    source.load_modality_processor = lambda *args, **kwargs: None
    try:
        yield
    finally:
        source.load_modality_processor = loader


def _tl_runner(lm, texts, special, hooks):
    bridge = boot_bridge(lm)
    wanted = set(hooks)

    def run(idx: list[int]) -> list[dict]:
        enc = [lm.tokenizer(texts[i], add_special_tokens=special)["input_ids"] for i in idx]
        import torch
        ids = torch.tensor(enc, dtype=torch.long, device=lm.model.device)  # equal lengths: no padding
        _, cache = bridge.run_with_cache(ids, names_filter=lambda n: n in wanted)
        missing = wanted - set(cache.keys())
        if missing:
            raise KeyError(f"TransformerLens bridge has no hook {sorted(missing)[0]!r} for this model")
        return host_rows({h: cache[h][:, -1] for h in hooks})

    return run


def trace_body(traced, resolved: list, weights: dict | None) -> dict:
    """Inside an nnsight trace of ``traced``: save each resolved site's value at the last token, in
    execution order, and with ``weights`` (per slot ``A``/``B``, ``(batch, seq)``) the weighted mean
    over the name's tokens as ``SITE@name_A``/``SITE@name_B`` (NaN where a name has no tokens)."""
    import nnsight
    import torch
    saved = nnsight.save({})
    for site in resolved:
        env = module(traced, site)
        val = env.output if site.port == "output" else env.input
        if isinstance(val, (tuple, list)):  # Llama/Qwen's self_attn returns (output, weights): the hooks read [0]
            val = val[0]
        saved[site.name] = val[:, -1, :]
        if weights is not None:
            for slot in ("A", "B"):
                w = weights[slot]
                total = w.sum(1, keepdim=True)
                mean = (w[..., None].to(val.dtype) * val).sum(1) / total.clamp(min=1e-12).to(val.dtype)
                saved[f"{site.name}@name_{slot}"] = torch.where(total > 0, mean, torch.full_like(mean, float("nan")))
    return saved
