"""Resumable stages and the one driver every study runs through.

A study (a run config, a sweep, a comparison, a BBQ study, a mode comparison;
locally or on the Ray backend) is a list of :class:`Stage` objects run in a
:class:`~evenhand.runs.RunDir` by :func:`run_stages`:

1. :func:`open_run` opens the directory, or creates it; a directory made from
   another config is refused (the error names the fields that differ);
2. the first stage is usually :class:`LoadModel`, which loads the model and
   refuses a run whose weights changed since it started;
3. every stage whose ``done(run)`` is true is skipped; every other one runs,
   and its time is recorded in the manifest with the stage marked finished;
4. a stage that raises (a ``KeyboardInterrupt`` included) leaves the run
   ``failed`` with the stage named in the manifest, so a rerun of the same
   config resumes from that stage; when every stage is through the run is
   ``done``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .runs import RunDir


@runtime_checkable
class Stage(Protocol):
    """One resumable step of a study."""

    name: str
    """Its name in the manifest (``timings``, ``stages_done``, a failure's ``error.stage``)."""

    def done(self, run: RunDir) -> bool:
        """Whether its outputs in ``run`` are complete, so that a resumed run skips it."""

    def run(self, run: RunDir) -> None:
        """Do the work, writing into ``run``."""


def finished_with(*outputs: Callable[[RunDir], Path]) -> Callable[[RunDir, str], bool]:
    """A ``done`` rule: the manifest records the stage as finished and every output path exists."""
    def done(run: RunDir, name: str) -> bool:
        return run.stage_done(name) and all(Path(o(run)).exists() for o in outputs)
    return done


def exists(*outputs: Callable[[RunDir], Path]) -> Callable[[RunDir, str], bool]:
    """A ``done`` rule: every output path exists (whether or not this driver wrote it)."""
    def done(run: RunDir, name: str) -> bool:
        return all(Path(o(run)).exists() for o in outputs)
    return done


@dataclass
class Step:
    """A :class:`Stage` made of a function: ``fn(run)`` does the work (its return value is kept in
    ``result``); ``when_done(run, name)`` (see :func:`finished_with`, :func:`exists`) says whether
    to skip it; without one the step always runs."""

    name: str
    fn: Callable[[RunDir], Any]
    when_done: Callable[[RunDir, str], bool] | None = None
    result: Any = field(default=None, repr=False)

    def done(self, run: RunDir) -> bool:
        return self.when_done is not None and bool(self.when_done(run, self.name))

    def run(self, run: RunDir) -> None:
        self.result = self.fn(run)


class LoadModel:
    """The model stage: loads the model (``load()``), refuses to resume a run whose weights changed and
    records ``describe(model)`` in the manifest. Never skipped. Call it to get the loaded model. (The Ray
    backend's driver passes a ``load`` that only fingerprints the weight files: its workers load.)"""

    def __init__(self, load: Callable[[], Any], describe: Callable[[Any], dict] = lambda lm: lm.describe(),
                 name: str = "load_model"):
        self.name = name
        self._load, self._describe = load, describe
        self._model = None

    def done(self, run: RunDir) -> bool:
        return False

    def run(self, run: RunDir) -> None:
        model = self._load()
        run.record_model(self._describe(model))
        self._model = model

    def __call__(self):
        if self._model is None:
            raise RuntimeError("the model stage has not run yet")
        return self._model


def open_run(path: str | Path, config: dict, **info) -> RunDir:
    """Open the run directory ``path`` made from ``config`` (or create it) and record ``info`` in its
    manifest. A directory holding a run of another config is refused (RunError naming the fields)."""
    run = RunDir.open_or_create(path, config)
    if info:
        run.update_manifest(**info)
    return run


Announce = Callable[[int, int, Stage, bool], None]


def run_stages(run: RunDir, stages: Sequence[Stage], announce: Announce | None = None) -> RunDir:
    """Run the stages not yet done in order, record each one's time, and finish the run.

    ``announce(i, n, stage, skipped)`` is called before each stage (1-based ``i``). A stage that
    raises marks the run failed (naming it) and the error propagates; later stages do not run."""
    for i, stage in enumerate(stages, 1):
        skipped = stage.done(run)
        if announce is not None:
            announce(i, len(stages), stage, skipped)
        if skipped:
            continue
        t0 = time.perf_counter()
        try:
            stage.run(run)
        except BaseException as exc:
            run.fail(stage.name, exc)
            raise
        run.mark_stage_done(stage.name, time.perf_counter() - t0)
    run.finish()
    return run


def run_study(path: str | Path, config: dict, stages: Sequence[Stage], announce: Announce | None = None,
              **info) -> RunDir:
    """:func:`open_run` then :func:`run_stages`: the skeleton every study runner shares."""
    return run_stages(open_run(path, config, **info), stages, announce)
