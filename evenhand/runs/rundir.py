"""Run directories: one class owns the layout, the manifest, the status and the model spec.

A run directory holds ``manifest.json`` (config, suite version, seeds, git SHA
and dirty flag, package versions, hardware, the model and its weights
fingerprint, status, finished stages, timings), ``responses.parquet``,
``metrics.json`` and the outputs of the later stages (activations, probes,
ablations, attribution, figures, a report page; a sweep's or a comparison's
cells). :class:`RunDir` is the only place that names these paths. Every file is
written to a temporary file in the same directory, flushed, then renamed over
its target, so a crash never leaves a half-written file and never destroys an
earlier complete one. The resumable stages that fill a run directory are in
:mod:`evenhand.running.stages`.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from ..files.atomic import atomic_open, atomic_path, write_json_atomic  # noqa: F401 (re-exported)
from ..files.runlock import LockHeld, RunLock
from ..models.loading import ModelSpec
from ..files.atomic import rewrite_in_place

if TYPE_CHECKING:
    import pandas as pd

    from ..models.loading import ModelSpec

PACKAGES = ("evenhand", "numpy", "pandas", "pyarrow", "pyyaml", "torch", "transformers", "nnsight",
            "transformer-lens", "pyvene", "scikit-learn", "seaborn")


class RunError(RuntimeError):
    """A run directory cannot be created or written."""


def run_with_responses(path: str | os.PathLike) -> "RunDir":
    """The run directory at ``path`` that holds decisions (``responses.parquet``; a comparison's or sweep's cell
    is one), else a :class:`RunError` saying what the path is: missing, a comparison or sweep (naming its
    cells), or a run whose decisions are not written yet."""
    p = Path(path)
    if not p.is_dir():
        raise RunError(f"{p}: no such run directory")
    run = RunDir(p)
    if not run.responses_path.is_file():
        cells = [c.path for c in run.cells() if c.responses_path.is_file()]
        where = (f"; it is a comparison or sweep: name one of its {len(cells)} cells, e.g. {cells[0]}" if cells else
                 "" if not run.exists() else f" yet (status {run.status}; decisions are written when the stage ends)")
        raise RunError(f"{p} is not a run directory with decisions: it holds no {run.responses_path.name}{where}")
    return run


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


def _at(relative: str, doc: str) -> property:
    """A read-only property: the path ``relative`` under the run directory."""
    return property(lambda self: self.path / relative, doc=doc)


def _plain(obj):
    return json.loads(json.dumps(obj, default=str))


def _without(config, keys: Iterable[str]):
    """``config`` without its top-level ``keys`` (a non-mapping config as it is)."""
    keys = set(keys)
    return {k: v for k, v in config.items() if k not in keys} if isinstance(config, dict) else config


def _renamed(config, renamed: Mapping[str, str] | None):
    """A plain config mapping with the dotted fields ``renamed`` (old -> new) moved to their new names."""
    if not renamed or not isinstance(config, dict):
        return config
    config = json.loads(json.dumps(config))
    for old, new in renamed.items():
        *head, key = old.split(".")
        *new_head, new_key = new.split(".")
        src = config
        for h in head:
            src = src.get(h) if isinstance(src, dict) else None
        if isinstance(src, dict) and key in src:
            dst = config
            for h in new_head:
                dst = dst.setdefault(h, {})
            dst[new_key] = src.pop(key)
    return config


def _differences(old, new, prefix: str = "") -> list[str]:
    """Dotted names of the fields where two plain config mappings differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(k), new.get(k), f"{prefix}{k}.") if k in old and k in new else [f"{prefix}{k}"]
        return out
    return [] if old == new else [prefix.rstrip(".") or "config"]


class RunDir:
    """One run's directory: its layout (every path below is a property or method), its manifest,
    its status (``running``, ``done``, ``failed``, ``interrupted``), the finished stages, the recorded model and the
    resume checks (same config, same weights). ``RunDir.create`` checks it is writable before any
    work starts; ``RunDir.open_or_create`` resumes a run of the same config.

    The directories inside a run (a probe sweep's, an ablation's, a cell's, a mode's) are run
    directories too, with the same file names: ``run.ablation_dir("label").responses_path``."""

    MANIFEST = "manifest.json"

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RunDir) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    # --- layout: files of a run ---
    manifest_path = _at(MANIFEST, "``manifest.json``: config, provenance, model, status, stages, timings.")
    responses_path = _at("responses.parquet", "The tidy responses table (one row per item).")
    restore_path = _at("restore.json", "A comparison cell's restore record: weights' digests before and after, hooks left.")
    metrics_path = _at("metrics.json", "The scored metrics with CIs.")
    decisions = _at("decisions", "``decisions/``: decide's resumable batch files.")
    activations = _at("activations", "``activations/``: the activation cache.")
    cache_index_path = _at("index.json", "An activation cache directory's list of cached item ids.")
    tables = _at("tables", "``tables/``: derived tables.")
    metrics_long_path = _at("tables/metrics_long.parquet", "The metrics as a tidy long table.")
    figures = _at("figures", "``figures/``: every figure of the run.")
    report_md = _at("report.md", "The report page (Markdown).")
    report_html = _at("report.html", "The report page (HTML).")
    planted_truth_path = _at("planted_truth.json", "The demo's planted truth per degree and metric (value, CI, "
                                                   "source) and the dial's beta.")
    calibration_path = _at("calibration.json", "A dial calibration's curve (the format of the fair organism's own).")
    calibration_table = _at("calibration.parquet", "A dial calibration's tidy table (one row per beta and metric).")
    calibration_stem = _at("calibration", "A dial calibration's figure (stem; .png).")
    mode_switch_csv = _at("mode_switch.csv", "The answer-vs-logprob mode comparison table.")
    # a probe sweep's, an ablation's and an attribution's directories
    probes_table = _at("probes.parquet", "A probe sweep's tidy table (in ``probes/<label>/``).")
    probes_csv = _at("probes.csv", "The probe sweep's table as CSV.")
    ablation_table = _at("ablation.parquet", "A name ablation's tidy table (in ``ablation/<variant>/``).")
    ablation_csv = _at("ablation.csv", "The name ablation's table as CSV.")
    attribution_items_path = _at("attribution_items.parquet", "Per-item logit attribution (in ``attribution/``).")
    attribution_table = _at("attribution.parquet", "The aggregated logit attribution.")
    attribution_csv = _at("attribution.csv", "The aggregated logit attribution as CSV.")
    verbalize_table = _at("verbalize.parquet", "A verbalization's tidy table (in ``verbalize/<label>/``).")
    verbalize_csv = _at("verbalize.csv", "The verbalization's table as CSV.")
    descriptions_path = _at("descriptions.parquet", "A verbalization's descriptions, one row per item and site.")
    # comparisons, BBQ studies and sweeps
    compare_table = _at("compare.parquet", "A comparison's tidy table.")
    compare_csv = _at("compare.csv", "A comparison's table as CSV.")
    frontier_stem = _at("frontier", "A comparison's frontier figure (stem; .pdf/.svg/.png).")
    compare_tex = _at("compare.tex", "A comparison's LaTeX table.")
    signs_json = _at("signs.json", "A comparison's alignment signs and where each came from.")
    selection_json = _at("selection.json", "A comparison's chosen setting of every swept arm, its reason, the signs.")
    selection_csv = _at("selection.csv", "A comparison's validation scores of every swept setting.")
    answers_path = _at("answers.parquet", "A BBQ study's answers, every configuration.")
    bbq_scores_path = _at("bbq_scores.parquet", "A BBQ study's scores.")
    bbq_scores_csv = _at("bbq_scores.csv", "A BBQ study's scores as CSV.")
    bias_figure_stem = _at("bias_by_configuration", "A BBQ study's figure (stem).")
    sweep_table = _at("sweep.parquet", "A sweep's tidy table over every cell.")
    sweep_csv = _at("sweep.csv", "A sweep's table as CSV.")
    # the dose-response study
    dose_table = _at("dose_response.parquet", "A dose-response run's tidy table (arm x beta x metric x stat).")
    dose_csv = _at("dose_response.csv", "The dose-response table as CSV.")
    dose_summary_csv = _at("summary.csv", "A dose-response run's per-arm summary.")
    dose_replications_table = _at("replications.parquet", "A dose-response run's rows per replication.")
    scrambled_csv = _at("scrambled.csv", "A dose-response run's scrambled controls' shares.")
    operator_norms_csv = _at("operator_norms.csv", "A dose-response run's erasers' operator norms.")
    dose_figure_stem = _at("dose_response", "A dose-response run's figure (stem; .pdf/.svg/.png).")
    gains_csv = _at("gains.csv", "A dose-response run's dial gain under each arm.")
    bench_json = _at("bench.json", "The dose-response benchmark's summary, failures and wall time.")
    seconds_path = _at("seconds.json", "A dose-response cell's or fit's decoding or fitting time.")
    replication_fields_path = _at("replications/replication.json", "The fields a dose-response run's "
                                  "independent replications were decoded with.")
    # the dose-response benchmark across dial mechanisms (its directory: the runs' parent, ``across/``)
    across_dir = _at("across", "The across-mechanism outputs' directory, in the per-mechanism runs' parent.")
    across_table = _at("across.parquet", "The dose-response slopes across dial mechanisms (arm x metric x mechanism).")
    across_csv = _at("across.csv", "The across-mechanism table as CSV.")
    across_json = _at("across.json", "The dose-response runs an across-mechanism table was read from.")
    robustness_csv = _at("robustness.csv", "Per arm and metric: the mechanisms under which its slope removes the "
                         "planted gap, removes nothing, neither, or is flagged.")
    across_figure_stem = _at("across", "The across-mechanism figure (stem; .pdf/.svg/.png; ``across_<metric>`` "
                             "for a metric other than FragGap).")

    # item response theory (evenhand irt)
    irt_items_path = _at("irt_items.parquet", "An IRT fit's item table: strata fields and 2PL parameters with SEs.")
    irt_items_csv = _at("irt_items.csv", "The IRT item table as CSV.")
    irt_runs_path = _at("irt_runs.parquet", "An IRT fit's runs and their abilities under the fitted parameters.")
    irt_runs_csv = _at("irt_runs.csv", "The IRT fit's runs as CSV.")
    adaptive_path = _at("adaptive.json", "Adaptive testing's state (answered items, ability; rewritten after each item).")

    # --- layout: directories inside a run ---
    def probe_dir(self, label: str) -> "RunDir":
        """``probes/<label>/``: one probe sweep (``probes.parquet``, ``probes.csv``, ``manifest.json``)."""
        return RunDir(self.path / "probes" / label)

    def probe_dirs(self) -> list["RunDir"]:
        """The probe sweeps written in this run, by label."""
        return [RunDir(p.parent) for p in sorted(self.path.glob("probes/*/probes.parquet"))]

    def verbalize_dir(self, label: str) -> "RunDir":
        """``verbalize/<label>/``: activations described in words (``verbalize.parquet``, ``verbalize.csv``,
        ``descriptions.parquet``, ``manifest.json``)."""
        return RunDir(self.path / "verbalize" / label)

    def ablation_dir(self, variant: str) -> "RunDir":
        """``ablation/<variant>/``: one name ablation (its own responses, decisions, activations, table)."""
        return RunDir(self.path / "ablation" / variant)

    def ablation_dirs(self) -> list["RunDir"]:
        """The name ablations written in this run, by variant."""
        return [RunDir(p.parent) for p in sorted(self.path.glob("ablation/*/ablation.parquet"))]

    @property
    def attribution_dir(self) -> "RunDir":
        """``attribution/``: the direct logit attribution."""
        return RunDir(self.path / "attribution")

    def cell(self, name: str) -> "RunDir":
        """``cells/<name>/``: a sweep's or a comparison's cell."""
        return RunDir(self.path / "cells" / name)

    def cells(self) -> list["RunDir"]:
        """Every ``cells/<name>/`` of the run, by name."""
        return [RunDir(p) for p in sorted((self.path / "cells").glob("*/")) if p.is_dir()]

    def validation_cell(self, name: str) -> "RunDir":
        """``validation/<name>/``: a comparison's run of the baseline or a swept setting on the validation items."""
        return RunDir(self.path / "validation" / name)

    def dose_cell(self, arm: str, k: int) -> "RunDir":
        """``cells/<arm>@<k>/``: a dose-response run's cell of ``arm`` at beta index ``k``."""
        return self.cell(f"{arm}@{k}")

    def replication_cell(self, r: int, arm: str, k: int) -> "RunDir":
        """``replications/r<NN>/<arm>@<k>/``: independent replication ``r``'s cell of ``arm`` at beta index ``k``."""
        return RunDir(self.path / "replications" / f"r{r:02d}" / f"{arm}@{k}")

    def seconds_files(self) -> list[Path]:
        """Every ``seconds.json`` under the run (its cells' and fits' times), sorted."""
        return sorted(self.path.glob(f"**/{self.seconds_path.name}"))

    def worker(self, name: str) -> "RunDir":
        """``workers/<name>/``: a run of its own (manifest, lock, stages) for one process that writes a
        share of this run's cells (a dose-response run's ``--only`` or ``--replication-shard``)."""
        return RunDir(self.path / "workers" / name)

    def workers(self) -> list["RunDir"]:
        """The worker runs written in this run, by name."""
        return [RunDir(p.parent) for p in sorted(self.path.glob(f"workers/*/{self.MANIFEST}"))]

    def mode_dir(self, mode: str) -> "RunDir":
        """``<mode>/``: the decisions of one mode in a mode comparison."""
        return RunDir(self.path / mode)

    def fitted_dir(self, key: str) -> Path:
        """``fitted/<key>/``: a comparison's saved fit."""
        return self.path / "fitted" / key

    def configuration_answers(self, name: str) -> Path:
        """``answers/<name>.parquet``: one BBQ configuration's answers."""
        return self.path / "answers" / f"{name}.parquet"

    def ray_shard(self, k: int) -> "RunDir":
        """``decisions/ray-KKKK/``: one Ray shard (its batch files in its own ``decisions/``)."""
        return RunDir(self.decisions / f"ray-{k:04d}")

    def ray_shards(self) -> list["RunDir"]:
        """The Ray shards that wrote batch files, in shard order."""
        return [RunDir(p) for p in sorted(self.decisions.glob("ray-*")) if (p / "decisions").is_dir()]

    @classmethod
    def find(cls, root: str | Path) -> list["RunDir"]:
        """Every run directory under ``root`` (its own included) whose manifest has a status."""
        out = []
        for m in sorted(Path(root).rglob(cls.MANIFEST)):
            try:
                if "status" in json.loads(m.read_text()):
                    out.append(cls(m.parent))
            except (OSError, ValueError):
                continue
        return out

    # --- creating and resuming ---
    @classmethod
    def create(cls, path: str | Path, config: dict, suite_version: str | None, seeds: dict) -> "RunDir":
        """Start a run in ``path`` (made and proven writable), taking its writer's lock."""
        run = cls(path)
        try:
            run.path.mkdir(parents=True, exist_ok=True)
            probe = run.path / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise RunError(f"output directory {run.path} is not writable: {exc.strerror or exc}") from None
        run.lock()
        manifest = {
            "config": config, "suite_version": suite_version, "seeds": seeds, "git": git_state(),
            "packages": package_versions(), "hardware": hardware(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "status": "running", "timings": {},
        }
        run.write_manifest(manifest)
        return run

    @classmethod
    def open_or_create(cls, path: str | Path, config: dict, may_change: Iterable[str] = (),
                       keep_stages: Iterable[str] = (), defaults: dict | None = None,
                       renamed: Mapping[str, str] | None = None,
                       normalise: Callable[[dict], dict] | None = None) -> "RunDir":
        """Resume the run in ``path`` if it was made from the same config (else refuse, naming the
        fields that differ); start one there when it holds none. Either way this process takes the
        directory's writer's lock (:meth:`lock`; :meth:`unlock` gives it back).

        The top-level config fields in ``may_change`` do not change the model's answers (the bootstrap's
        resamples, say): when only they differ the run resumes, the manifest records the new config and
        the change (``config_changes``), and every finished stage but ``keep_stages`` (those that produce
        or cache answers) is forgotten so that it runs again with the new values. ``defaults``: the values of
        fields a recorded config lacks (written before the field existed). ``renamed`` (old dotted
        field -> new) reads the recorded config under the new names (a field renamed since the run was made),
        and the manifest then records the config under the new names. ``normalise`` maps a recorded config to
        the form the study now records (two spellings of one config, e.g. a one-setting sweep and its options)."""
        run = cls(path)
        if not run.exists():
            return cls.create(path, config, suite_version=None, seeds={})
        run.lock()
        try:
            old = run.manifest()
            if normalise is not None and isinstance(old.get("config"), dict):
                old["config"] = normalise(_plain(old["config"]))
            changed = run.check_same_config(config, old, may_change, defaults, renamed)
            old["config"] = _renamed(_plain(old.get("config")), renamed)  # under the fields' current names
            if changed:
                before, after = _plain(old.get("config")), _plain(config)
                old["config"] = after
                old.setdefault("config_changes", []).append({
                    "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "fields": {k: {"old": before.get(k), "new": after.get(k)} for k in changed}})
                keep = set(keep_stages)
                old["stages_done"] = [s for s in old.get("stages_done") or [] if s in keep]
            old["status"] = "running"
            old.pop("error", None)
            old["resumed"] = old.get("resumed", 0) + 1
            run.write_manifest(old)
        except BaseException:
            run.unlock()
            raise
        return run

    def check_same_config(self, config: dict, manifest: dict | None = None,
                          may_change: Iterable[str] = (), defaults: dict | None = None,
                          renamed: Mapping[str, str] | None = None) -> list[str]:
        """Raise RunError naming the config fields that differ from the recorded ones (read under the new
        names of ``renamed``), the top-level fields in ``may_change`` aside (a top-level field the recorded
        config lacks counts as its value in ``defaults``, when given); return those of ``may_change`` that
        differ."""
        old = _renamed(_plain((manifest or self.manifest()).get("config")), renamed)
        if defaults and isinstance(old, dict):
            old = {**_plain(defaults), **old}
        new = _plain(config)
        may_change = set(may_change)
        differ = self.config_differences(config, manifest, may_change, defaults, renamed)
        if differ:
            allowed = f" ({', '.join(sorted(may_change))} may change)" if may_change else ""
            raise RunError(f"{self.path} holds a run of a different config (fields that differ: "
                           f"{', '.join(differ[:8])}); choose another output_dir or delete that directory{allowed}")
        if not (isinstance(old, dict) and isinstance(new, dict)):
            return []
        return sorted(k for k in may_change if old.get(k) != new.get(k))

    def config_differences(self, config: dict, manifest: dict | None = None, may_change: Iterable[str] = (),
                           defaults: dict | None = None, renamed: Mapping[str, str] | None = None) -> list[str]:
        """The dotted config fields where ``config`` differs from the recorded one (as
        :meth:`check_same_config` reads it), the top-level fields ``may_change`` aside; [] when none."""
        old = _renamed(_plain((manifest or self.manifest()).get("config")), renamed)
        if defaults and isinstance(old, dict):
            old = {**_plain(defaults), **old}
        old, new = _without(old, may_change), _without(_plain(config), may_change)
        return [] if old == new else _differences(old, new)

    # --- the writer's lock ---
    def lock(self) -> None:
        """Take this directory's writer's lock (``.lock``: pid, host, since); a second writer is refused
        with a RunError naming the holder; a stale lock (a dead process on this host) is taken over."""
        try:
            RunLock(self.path).acquire()
        except LockHeld as exc:
            raise RunError(str(exc)) from None

    def unlock(self) -> None:
        """Give back this process's writer's lock (nothing when it holds none)."""
        RunLock(self.path).release()

    def check_same_model(self, model: dict) -> None:
        """Refuse to resume a run whose model's weights changed since it started (a resumed run would
        otherwise mix answers of two models). ``model`` is ``LoadedModel.describe()``."""
        old = (self.manifest().get("model") or {}).get("weights")
        new = model.get("weights")
        if old and new and old != new:
            raise RunError(f"{self.path} was started with other weights for model {model.get('name')!r} "
                           f"(fingerprint {old}, now {new}); delete that directory or choose another output_dir")

    def record_model(self, model: dict) -> None:
        """Check the weights are the ones the run started with, then record the model."""
        self.check_same_model(model)
        self.update_manifest(model=model)

    def model_spec(self) -> "ModelSpec":
        """The model a run was made with, rebuilt from its manifest: ``config.model`` (a spec mapping or a
        name), else the spec recorded with the loaded model."""
        manifest = self.manifest()
        raw = (manifest.get("config") or {}).get("model")
        if raw is None:
            raw = (manifest.get("model") or {}).get("spec")
        if isinstance(raw, str):
            return ModelSpec(raw)
        if not isinstance(raw, dict) or "model" not in raw:
            raise ValueError(f"{self.manifest_path} names no model (config.model)")
        return ModelSpec(**{k: v for k, v in raw.items() if k in ModelSpec.__dataclass_fields__})

    # --- manifest, status, stages ---
    def exists(self) -> bool:
        """Whether a manifest was written here."""
        return self.manifest_path.exists()

    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())

    def write_manifest(self, manifest: dict) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def update_manifest(self, **fields) -> None:
        m = self.manifest()
        m.update(fields)
        self.write_manifest(m)

    @property
    def config(self) -> dict:
        """The config the run was made from."""
        return self.manifest().get("config") or {}

    @property
    def status(self) -> str | None:
        """``running``, ``done``, ``failed`` or ``interrupted`` as the manifest says now (None without a readable manifest)."""
        try:
            return self.manifest().get("status")
        except (OSError, ValueError):
            return None

    def stage_done(self, name: str) -> bool:
        """Whether the manifest records stage ``name`` as finished."""
        return self.exists() and name in (self.manifest().get("stages_done") or [])

    def mark_stage_done(self, name: str, seconds: float) -> None:
        """Record stage ``name`` as finished in ``seconds``."""
        m = self.manifest()
        m.setdefault("timings", {})[name] = round(seconds, 3)
        m["stages_done"] = list(dict.fromkeys([*(m.get("stages_done") or []), name]))
        self.write_manifest(m)

    def record_timing(self, stage: str, seconds: float) -> None:
        m = self.manifest()
        m.setdefault("timings", {})[stage] = round(seconds, 3)
        self.write_manifest(m)

    @contextmanager
    def timed(self, stage: str):
        t0 = time.perf_counter()
        yield
        self.record_timing(stage, time.perf_counter() - t0)

    def finish(self) -> None:
        """Mark the run done and give back the writer's lock."""
        try:
            self.update_manifest(status="done", finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        finally:
            self.unlock()

    def fail(self, stage: str, error: BaseException) -> None:
        """Mark the run failed in ``stage`` (``interrupted`` when the error is a ``KeyboardInterrupt``: Ctrl-C or
        SIGINT); a rerun of the same config resumes from there. Gives back the writer's lock."""
        interrupted = isinstance(error, KeyboardInterrupt)
        message = str(error)[:500] or ("interrupted (Ctrl-C or SIGINT); rerun the same command to resume at this "
                                       "stage" if interrupted else type(error).__name__)
        m = dict(self.manifest(), status="interrupted" if interrupted else "failed",
                 error={"stage": stage, "type": type(error).__name__, "message": message})
        try:
            self.write_manifest(m)
        except OSError:  # a full disk: rewrite the manifest over its own blocks
            rewrite_in_place(self.manifest_path, m)
        finally:
            self.unlock()

    # --- tables ---
    def write_responses(self, df: "pd.DataFrame") -> Path:
        write_table_atomic(self.responses_path, df)
        return self.responses_path

    def read_responses(self) -> "pd.DataFrame":
        import pandas as pd
        return pd.read_parquet(self.responses_path)

    def write_metrics(self, metrics: dict) -> Path:
        write_json_atomic(self.metrics_path, metrics)
        return self.metrics_path

    def read_metrics(self) -> dict:
        return json.loads(self.metrics_path.read_text())
