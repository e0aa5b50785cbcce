"""Resumable stages and the one driver every study runs through.

A study (a run config, a sweep, a comparison, a BBQ study, a mode comparison; locally or on the Ray backend) is a
list of :class:`Stage` objects run in a :class:`~evenhand.runs.rundir.RunDir` by :func:`run_stages`:

1. :func:`open_run` opens the directory, or creates it; a directory made from another config is refused (the error
   names the fields that differ);
2. the first stage is usually :class:`LoadModel`, which loads the model and refuses a run whose weights changed
   since it started;
3. every stage whose ``done(run)`` is true is skipped; every other one runs, and its time is recorded in the
   manifest with the stage marked finished;
4. a stage that raises leaves the run ``failed`` (``interrupted`` for a ``KeyboardInterrupt``) with the stage named
   in the manifest, so a rerun of the same config resumes from that stage; when every stage is through the run is
   ``done``."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from ..runs.rundir import RunDir, RunError


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
class FnStage:
    """A :class:`Stage` made of a function: ``fn(run)`` does the work (its return value is kept in
    ``result``); ``when_done(run, name)`` (see :func:`finished_with`, :func:`exists`) says whether
    to skip it; without one the stage always runs. ``about`` says what it works on in its progress
    header (``"12,160 items, 4 sites"``); ``work`` is its amount of work in items (for the estimate of
    the time left; None for a stage too small to count)."""

    name: str
    fn: Callable[[RunDir], Any]
    when_done: Callable[[RunDir, str], bool] | None = None
    about: str = ""
    work: int | None = None
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
                 name: str = "load_model", about: str = ""):
        self.name, self.about = name, about
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


def open_run(path: str | Path, config: dict, may_change: Sequence[str] = (), keep_stages: Sequence[str] = (),
             defaults: dict | None = None, renamed: Mapping[str, str] | None = None,
             normalise: Callable[[dict], dict] | None = None, **info) -> RunDir:
    """Open the run directory ``path`` made from ``config`` (or create it), take its writer's lock and
    record ``info`` in its manifest. A directory holding a run of another config is refused (RunError
    naming the fields); one another live process is writing is refused (naming its pid and host). The
    top-level fields ``may_change`` may differ on resume; then every finished stage but ``keep_stages``
    runs again; a field the recorded config lacks counts as its value in ``defaults``; ``renamed``
    (old dotted field -> new) reads a recorded config under the new names; ``normalise`` maps a recorded config
    to today's spelling of it (:meth:`RunDir.open_or_create`)."""
    run = RunDir.open_or_create(path, config, may_change, keep_stages, defaults, renamed, normalise)
    try:
        recorded, now = run.manifest().get("suite_version"), info.get("suite_version")
        if recorded and now and recorded != now:
            raise RunError(f"{run.path} holds a run on suite {recorded}, but these items are suite {now}: resuming "
                           f"would mix the two versions' items in one table; use another output_dir (or the "
                           f"EvenHand version that made the run)")
        if info:
            run.update_manifest(**info)
    except BaseException:
        run.unlock()
        raise
    return run


Announce = Callable[[int, int, Stage, bool], None]


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class StageReport:
    """An ``announce`` for :func:`run_stages` that prints one header per stage to ``stream`` (stderr):
    ``[3/7] cache: 12,160 items, 4 sites (elapsed 1m02s)``, ``[1/7] decide: done, skipped``, and a closing
    line with the total time.

    Time left: a stage that reports its progress (:func:`report_progress`, called by the decisions and the
    activation cache as items finish, per batch) gets a line every ``every`` seconds (30) from its own measured
    rate: ``[3/7] cache: 4,000/12,160 items, 65.3 items/s: about 2m05s left in this stage``. Stages differ in their
    cost per item (a decision generates tokens, a cache pass does one forward pass, scoring none), so a
    header never guesses from another stage's rate: it says ``time left: estimating… from this stage's own
    rate`` until the stage has measured one."""

    def __init__(self, title: str = "", stream=None, every: float = 30.0):
        self.title = title
        self.stream = stream
        self.every = every
        self.t0 = time.perf_counter()
        self._current: tuple[float, int | None] | None = None
        self._head = ""
        self._name = ""
        self._origin: tuple[float, int] | None = None
        self._seen: tuple[float, int] | None = None
        self._last_line = 0.0
        self._last: tuple[str, float, int] | None = None
        self.stages: list[Stage] = []
        """The stages of the run (set by :func:`run_stages`), for the work still to do."""

    def _print(self, line: str) -> None:
        stream = self.stream or sys.stderr
        try:
            from tqdm.auto import tqdm
            tqdm.write(line, file=stream)   # above a stage's own progress bar, not through it
            stream.flush()
        except ImportError:
            print(line, file=stream, flush=True)

    def _close_current(self) -> None:
        if self._current is not None:
            started, work = self._current
            if work:
                self._last = (self._name, time.perf_counter() - started, work)
            self._current = None
            self._origin = None

    def rate(self) -> float | None:
        """The current stage's measured rate in items per second (None before two progress reports)."""
        if self._origin is None or self._seen is None:
            return None
        (t0, n0), (t1, n1) = self._origin, self._seen
        return (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None

    def progress(self, done: int, total: int | None = None) -> str | None:
        """The current stage has ``done`` of its ``total`` items (default its ``work``). Its rate is measured
        from its first report (so items a resumed stage had already done do not count); at most every
        ``every`` seconds a line with the time left in this stage at that rate is printed. Returns the line."""
        if self._current is None:
            return None
        now = time.perf_counter()
        total = total if total is not None else self._current[1]
        if self._origin is None:
            self._origin, self._seen, self._last_line = (now, done), (now, done), now
            return None
        self._seen = (now, done)
        if now - self._last_line < self.every:
            return None
        self._last_line = now
        rate = self.rate()
        count = f"{done:,}/{total:,} items" if total else f"{done:,} items"
        line = f"{self._head}: {count}"
        if rate:
            line += f", {rate:,.1f} items/s" + (f": about {_clock((total - done) / rate)} left in this stage"
                                                 if total and total > done else "")
        self._print(line)
        return line

    def __call__(self, i: int, n: int, stage: Stage, skipped: bool) -> None:
        self._close_current()
        about = getattr(stage, "about", "") or ""
        work = getattr(stage, "work", None)
        head = f"[{i}/{n}] {stage.name}" + (f": {about}" if about else "")
        if skipped:
            self._print(f"{head} (done, skipped)")
            return
        elapsed = time.perf_counter() - self.t0
        # No guess from another stage's rate (stages differ per item: a guess from decide's rate was off 2-7x for
        # the cache and 100x for scoring); the time left comes from this stage's own rate once it has one.
        guess = "; time left: estimating… from this stage's own rate" if work else ""
        self._print(f"{head} (elapsed {_clock(elapsed)}{guess})")
        self._current, self._name, self._head = (time.perf_counter(), work), stage.name, f"[{i}/{n}] {stage.name}"
        self._origin = self._seen = None

    def end(self, run: RunDir) -> None:
        """The closing line, after the last stage."""
        self._close_current()
        self._print(f"{self.title or run.path}: done in {_clock(time.perf_counter() - self.t0)}")


_ACTIVE: list[StageReport] = []
"""The report of the stages now running (:func:`run_stages` sets it), for :func:`report_progress`."""


def report_progress(done: int, total: int | None = None) -> None:
    """Tell the running stage's :class:`StageReport` (if any) that ``done`` of ``total`` items are done; a
    no-op outside :func:`run_stages` or without a report. Long stages call it as items finish."""
    if _ACTIVE:
        _ACTIVE[-1].progress(done, total)


def run_stages(run: RunDir, stages: Sequence[Stage], announce: Announce | None = None) -> RunDir:
    """Run the stages not yet done in order, record each one's time, and finish the run.

    ``announce(i, n, stage, skipped)`` is called before each stage (1-based ``i``; a
    :class:`StageReport` prints headers). A stage that raises marks the run failed (naming it) and the
    error propagates; later stages do not run. The run's writer's lock is held throughout and given
    back at the end."""
    run.lock()
    if isinstance(announce, StageReport):
        announce.stages = list(stages)
        announce.t0 = time.perf_counter()
        _ACTIVE.append(announce)
    try:
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
        if isinstance(announce, StageReport):
            announce.end(run)
    finally:
        if isinstance(announce, StageReport) and announce in _ACTIVE:
            _ACTIVE.remove(announce)
        run.unlock()
    return run


def run_study(path: str | Path, config: dict, stages: Sequence[Stage], announce: Announce | None = None,
              may_change: Sequence[str] = (), keep_stages: Sequence[str] = (), defaults: dict | None = None,
              renamed: Mapping[str, str] | None = None, **info) -> RunDir:
    """:func:`open_run` then :func:`run_stages`: the skeleton every study runner shares. The driver holds the
    directory's writer's lock (``RunDir.lock``) from :func:`open_run` until the run is done or failed."""
    return run_stages(open_run(path, config, may_change, keep_stages, defaults, renamed, **info), stages, announce)
