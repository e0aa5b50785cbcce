"""A dequantised copy of a GGUF checkpoint, made once and read in seconds afterwards.

Hugging Face dequantises a GGUF file on every load (about 4 minutes for the Gemma-3 270M
Q4_K_M preset on two CPU cores). :func:`dequantised_copy` does it once and writes the float32
weights (safetensors), config, generation config and tokenizer to
``<cache root>/<name>-<sha256 of the GGUF, 16 hex>/`` with a manifest (``evenhand-cache.json``:
the GGUF's sha256, and every file's size and sha256). The directory is built under a temporary
name beside it and renamed into place when complete, so an interrupted build never looks like a
cache. Each load checks the manifest, the GGUF's hash and every file's size and sha256; a cache
that fails any check (damaged, partly deleted, made from another GGUF) is rebuilt, with a message
on stderr saying why. The cache root is ``$EVENHAND_CACHE/models`` (default
``~/.cache/evenhand/models``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..files.runlock import current_umask

MANIFEST = "evenhand-cache.json"
FORMAT = 2


def cache_root() -> Path:
    """Where dequantised copies live: ``$EVENHAND_CACHE/models`` or ``~/.cache/evenhand/models``."""
    base = os.environ.get("EVENHAND_CACHE") or str(Path("~/.cache/evenhand").expanduser())
    return Path(base).expanduser() / "models"


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    """The sha256 of a file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def cache_dir_for(gguf_path: str | Path, name: str, sha: str | None = None) -> Path:
    """The cache directory of ``gguf_path`` (``sha``: its sha256, computed when not given)."""
    return cache_root() / f"{name}-{(sha or file_sha256(gguf_path))[:16]}"


def cache_problem(d: Path, source_sha: str) -> str | None:
    """Why ``d`` is not a usable copy of the GGUF with sha256 ``source_sha`` (None when it is)."""
    if not d.is_dir():
        return "no cached copy"
    try:
        man = json.loads((d / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{d / MANIFEST} is missing (an incomplete copy)"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{d / MANIFEST} is not valid JSON ({exc})"
    if man.get("format") != FORMAT:
        return f"cache format {man.get('format')!r}, this version writes {FORMAT}"
    if man.get("source_sha256") != source_sha:
        return f"made from another GGUF (sha256 {str(man.get('source_sha256'))[:16]}, now {source_sha[:16]})"
    files = man.get("files") or {}
    if not any(f.endswith(".safetensors") for f in files):
        return "the manifest lists no weight file"
    for rel, want in files.items():
        f = d / rel
        if not f.is_file():
            return f"{rel} is missing"
        if f.stat().st_size != want.get("size"):
            return f"{rel} is {f.stat().st_size:,} bytes, the manifest says {want.get('size'):,}"
        if file_sha256(f) != want.get("sha256"):
            return f"{rel} does not match its sha256 (damaged)"
    return None


def _build(gguf_path: Path, tmp: Path, source_sha: str) -> None:
    """Dequantise ``gguf_path`` to float32 with Hugging Face and write the copy and its manifest into ``tmp``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, name = str(gguf_path.parent), gguf_path.name
    tok = AutoTokenizer.from_pretrained(where, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    model.hf_quantizer = None  # save_pretrained refuses a model still marked as GGUF-quantised
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    cfg_path = tmp / "tokenizer_config.json"  # the generic class: it loads the same tokenizer.json 2-3x faster
    tok_cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg_path.write_text(json.dumps({**tok_cfg, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2) + "\n",
                        encoding="utf-8")
    _check_round_trip(model, tok, tmp)
    files = {}
    for f in sorted(p for p in tmp.rglob("*") if p.is_file()):
        files[str(f.relative_to(tmp))] = {"size": f.stat().st_size, "sha256": file_sha256(f)}
    manifest = {"format": FORMAT, "source": str(gguf_path), "source_sha256": source_sha, "dtype": "float32",
                "transformers": transformers.__version__, "torch": torch.__version__, "files": files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


_SAMPLE = "<start_of_turn>user\nWho should get the job, A or B? Ünïcödé, 12345 …<end_of_turn>\n"


def _check_round_trip(model, tok, tmp: Path) -> None:
    """Reload the written copy and require every weight bit-equal to the dequantised model's and the same
    token ids for a sample text; raises RuntimeError naming the first difference (the copy is then discarded)."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    again = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
    want, got = model.state_dict(), again.state_dict()
    if set(want) != set(got):
        raise RuntimeError(f"dequantised copy in {tmp}: weights {sorted(set(want) ^ set(got))[:5]} differ in name")
    for k, v in want.items():
        if v.dtype != got[k].dtype or not torch.equal(v, got[k]):
            raise RuntimeError(f"dequantised copy in {tmp}: weight {k!r} is not bit-equal after reloading")
    saved = PreTrainedTokenizerFast.from_pretrained(tmp)
    for special in (True, False):
        ids = tok(_SAMPLE, add_special_tokens=special)["input_ids"]
        if saved(_SAMPLE, add_special_tokens=special)["input_ids"] != ids or saved.decode(ids) != tok.decode(ids):
            raise RuntimeError(f"dequantised copy in {tmp}: the saved tokenizer tokenises or decodes differently "
                               f"from the GGUF's")
    for attr in ("bos_token", "eos_token", "pad_token", "unk_token"):
        if getattr(saved, attr) != getattr(tok, attr):
            raise RuntimeError(f"dequantised copy in {tmp}: {attr} {getattr(saved, attr)!r}, the GGUF's "
                               f"{getattr(tok, attr)!r}")


def existing_copy(gguf_path: str | Path, name: str) -> Path | None:
    """The directory of a usable copy of ``gguf_path`` when there is one (None: none, or it fails a check)."""
    sha = file_sha256(gguf_path)
    d = cache_dir_for(gguf_path, name, sha)
    return d if cache_problem(d, sha) is None else None


def dequantised_copy(gguf_path: str | Path, name: str, log=None) -> Path:
    """The directory of the float32 copy of ``gguf_path`` (a local ``.gguf`` file), made on first use.

    ``name`` prefixes the directory name. A missing, damaged or stale copy is (re)built, with a line on
    ``log`` (default stderr) saying why; the build is written under a temporary name and renamed into place."""
    log = log or sys.stderr
    gguf_path = Path(gguf_path).resolve()
    sha = file_sha256(gguf_path)
    d = cache_dir_for(gguf_path, name, sha)
    problem = cache_problem(d, sha)
    if problem is None:
        return d
    if d.exists():
        print(f"evenhand: the dequantised copy {d} is unusable ({problem}): rebuilding it", file=log, flush=True)
    print(f"evenhand: dequantising {gguf_path.name} once into {d} (minutes; later loads read the copy)",
          file=log, flush=True)
    d.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.", suffix=".tmp", dir=d.parent))
    try:
        _build(gguf_path, tmp, sha)
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700; others on the machine may read the copy
        if d.exists():  # the damaged copy goes only once a complete one is ready to take its place
            old = Path(tempfile.mkdtemp(prefix=f".{d.name}.", suffix=".old", dir=d.parent))
            os.replace(d, old / "copy")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, d)
        except OSError:  # another process put a copy there first: keep it if it is good
            if cache_problem(d, sha) is not None:
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return d
