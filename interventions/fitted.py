"""A fitted intervention and the key of a fit: what was fitted, with which options, on which items.

A :class:`Fitted` carries everything needed to apply an intervention later: the
method's name, the fit options it was made with (as a JSON mapping), the seed,
the fit key, whether it is the random-direction control, JSON metadata and named
tensors. It saves to a directory as ``fitted.json`` + ``tensors.safetensors``
(never pickle) and loads back unchanged, tensor order included.

:func:`fit_key` is the cache key of a fit: a hash of the method name, its fit
options, the seed and the ids of the training items. Two fits with the same key
are interchangeable; any fit option, the seed or the training set changing
changes the key.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from evenhand.runs.rundir import atomic_open, write_json_atomic

CONTROLS = ("none", "random")


class InterventionError(ValueError):
    """A bad intervention name, option, fitted file or model state."""


def options_json(options) -> dict:
    """An options dataclass (or mapping) as a JSON-ready dict (tuples become lists)."""
    raw = asdict(options) if is_dataclass(options) else dict(options)
    return json.loads(json.dumps(raw, sort_keys=True, default=str))


def fit_key(name: str, fit_options, seed: int, item_ids: Iterable[str]) -> str:
    """The cache key of a fit: sha256 of the method name, its fit options, the seed and the train item ids."""
    ids = hashlib.sha256("\n".join(str(i) for i in item_ids).encode()).hexdigest()
    raw = json.dumps({"name": name, "fit_options": options_json(fit_options), "seed": int(seed), "items": ids},
                     sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class Fitted:
    """A fitted intervention: its fit options, seed and key, metadata and tensors (JSON + safetensors)."""
    name: str
    fit_options: dict = field(default_factory=dict)
    seed: int = 0
    key: str = ""
    control: str = "none"
    info: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.control not in CONTROLS:
            raise InterventionError(f"Fitted.control must be one of {', '.join(CONTROLS)}, got {self.control!r}")

    def save(self, path: str | Path) -> Path:
        """Write ``tensors.safetensors`` and then ``fitted.json`` into ``path`` (created), each atomically (renamed
        into place), so a reader that finds ``fitted.json`` finds whole tensors; returns the directory."""
        from safetensors.torch import save

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in self.tensors.items()}
        with atomic_open(out / "tensors.safetensors", "wb") as (fh, _):  # readers of a shared fit never see half
            fh.write(save(tensors))
        write_json_atomic(out / "fitted.json", {"name": self.name, "fit_options": self.fit_options, "seed": self.seed,
                                                "key": self.key, "control": self.control, "info": self.info,
                                                "tensors": list(tensors)})
        return out

    @classmethod
    def load(cls, path: str | Path) -> "Fitted":
        """The fitted intervention saved in ``path``; errors name the missing or inconsistent part."""
        from safetensors.torch import load_file
        path = Path(path)
        meta_file = path / "fitted.json"
        if not meta_file.exists():
            raise InterventionError(f"{path} holds no fitted intervention (fitted.json missing)")
        meta = json.loads(meta_file.read_text())
        for k in ("name", "fit_options", "seed", "key", "control", "info", "tensors"):
            if k not in meta:
                raise InterventionError(f"{meta_file}: field {k!r} is missing")
        stored = load_file(str(path / "tensors.safetensors")) if meta["tensors"] else {}
        if sorted(stored) != sorted(meta["tensors"]):
            raise InterventionError(f"{path}: tensors.safetensors does not hold the tensors fitted.json lists")
        tensors = {k: stored[k] for k in meta["tensors"]}
        return cls(meta["name"], meta["fit_options"], int(meta["seed"]), meta["key"], meta["control"], meta["info"],
                   tensors)

    def replace_tensors(self, tensors: Mapping, control: str) -> "Fitted":
        """The same fit with ``tensors`` replaced (the random-direction control)."""
        return Fitted(self.name, dict(self.fit_options), self.seed, self.key, control, dict(self.info),
                      {**self.tensors, **tensors})
