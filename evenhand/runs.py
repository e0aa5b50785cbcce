"""Run directories: a manifest, tidy tables and metrics, each written atomically.

A run directory holds ``manifest.json`` (config, suite version, seeds, git SHA
and dirty flag, package versions, hardware, timings), ``responses.parquet``
and ``metrics.json``. Every file is written to a temporary file in the same
directory, flushed, then renamed over its target, so a crash never leaves a
half-written file and never destroys an earlier complete one.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

PACKAGES = ("evenhand", "numpy", "pandas", "pyarrow", "pyyaml", "torch", "transformers", "nnsight",
            "transformer-lens", "pyvene", "scikit-learn", "seaborn")


class RunError(RuntimeError):
    """A run directory cannot be created or written."""


@contextmanager
def atomic_path(path: Path, prefix: str | None = None):
    """Yield a temporary path beside ``path``; when the block succeeds, fsync it and rename it over
    ``path``; when it fails, remove it. Readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextmanager
def atomic_open(path: Path, mode: str = "w"):
    """Yield ``(file, temporary path)`` opened with ``mode`` beside ``path``; the file replaces
    ``path`` when the block succeeds (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as fh:
            yield fh, tmp


def write_json_atomic(path: Path, obj) -> None:
    with atomic_open(Path(path)) as (fh, _):
        json.dump(obj, fh, indent=2, sort_keys=True, default=str, allow_nan=False)
        fh.write("\n")


def write_table_atomic(path: Path, df: "pd.DataFrame") -> None:
    path = Path(path)
    with atomic_open(path, "wb") as (fh, tmp):
        if path.suffix == ".parquet":
            df.to_parquet(fh, index=False)
        elif path.suffix == ".jsonl":
            fh.write(df.to_json(orient="records", lines=True, force_ascii=False).encode())
        elif path.suffix == ".csv":
            fh.write(df.to_csv(index=False).encode())
        else:
            raise RunError(f"{path}: table files must end in .parquet, .jsonl or .csv")


def git_state(start: Path | None = None) -> dict:
    """The git SHA and dirty flag of the checkout this package runs from (None outside git)."""
    where = start or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return {"sha": None, "dirty": None}
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=5)
        return {"sha": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def hardware() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        import torch  # noqa: PLC0415 (optional)
        info["cuda"] = torch.cuda.is_available()
        if info["cuda"]:
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        info["cuda"] = None
    return info


class RunDir:
    """One run's directory. ``RunDir.create`` checks it is writable before any work starts."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | Path, config: dict, suite_version: str, seeds: dict) -> "RunDir":
        run = cls(path)
        try:
            run.path.mkdir(parents=True, exist_ok=True)
            probe = run.path / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise RunError(f"output directory {run.path} is not writable: {exc.strerror or exc}") from None
        manifest = {
            "config": config, "suite_version": suite_version, "seeds": seeds, "git": git_state(),
            "packages": package_versions(), "hardware": hardware(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "status": "running", "timings": {},
        }
        run.write_manifest(manifest)
        return run

    @classmethod
    def open_or_create(cls, path: str | Path, config: dict) -> "RunDir":
        """Resume the run in ``path`` if it was made from the same config; else start one there."""
        run = cls(path)
        if run.manifest_path.exists():
            old = run.manifest()
            if json.loads(json.dumps(old.get("config"), default=str)) != json.loads(json.dumps(config, default=str)):
                raise RunError(f"{run.path} holds a run of a different config; choose another output_dir "
                               f"or delete that directory")
            old["status"] = "running"
            old["resumed"] = old.get("resumed", 0) + 1
            run.write_manifest(old)
            return run
        return cls.create(path, config, suite_version=None, seeds={})

    def check_same_model(self, model: dict) -> None:
        """Refuse to resume a run whose model's weights changed since it started (a resumed run would
        otherwise mix answers of two models). ``model`` is ``LoadedModel.describe()``."""
        old = (self.manifest().get("model") or {}).get("weights")
        new = model.get("weights")
        if old and new and old != new:
            raise RunError(f"{self.path} was started with other weights for model {model.get('name')!r} "
                           f"(fingerprint {old}, now {new}); delete that directory or choose another output_dir")

    def record_timing(self, stage: str, seconds: float) -> None:
        m = self.manifest()
        m.setdefault("timings", {})[stage] = round(seconds, 3)
        self.write_manifest(m)

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())

    def write_manifest(self, manifest: dict) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def update_manifest(self, **fields) -> None:
        m = self.manifest()
        m.update(fields)
        self.write_manifest(m)

    @contextmanager
    def timed(self, stage: str):
        t0 = time.perf_counter()
        yield
        self.record_timing(stage, time.perf_counter() - t0)

    def write_responses(self, df: "pd.DataFrame") -> Path:
        out = self.path / "responses.parquet"
        write_table_atomic(out, df)
        return out

    def read_responses(self) -> "pd.DataFrame":
        import pandas as pd
        return pd.read_parquet(self.path / "responses.parquet")

    def write_metrics(self, metrics: dict) -> Path:
        out = self.path / "metrics.json"
        write_json_atomic(out, metrics)
        return out

    def finish(self) -> None:
        self.update_manifest(status="done", finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
