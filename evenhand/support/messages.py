"""The messages for the faults a user meets: a full disk, an unwritable path, a file that is not
UTF-8, a run whose answers mostly cannot be parsed, a scored file too small to estimate from.

Each message is one line that names the file and says what to do; the command line prints it instead of
a traceback. :func:`warn_unparseable` is called where a run's responses are written.
"""
from __future__ import annotations

import errno
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

UNPARSEABLE_LIMIT = 0.5
"""A run whose share of answers without an A/B choice exceeds this is warned about loudly."""

_HINTS = {
    errno.ENOSPC: "free space on that disk or write somewhere else, then run the command again; "
                  "a run resumes where it stopped",
    errno.EDQUOT: "your disk quota is used up: free space or write somewhere else, then run the command again",
    errno.EACCES: "choose a location you can write (e.g. another --out) or fix its permissions",
    errno.EPERM: "choose a location you can write (e.g. another --out) or fix its permissions",
    errno.EROFS: "that file system is read-only: choose a writable location (e.g. another --out)",
    errno.ENOTDIR: "a part of that path is a file, not a directory: choose another path",
    errno.EEXIST: "a file stands where a directory is needed: choose another path or move the file",
    errno.EISDIR: "that path is a directory, not a file: name a file",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOENT: "no such file or directory: check the path",
}

_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[^./]+\.tmp$")
"""The temporary file an atomic write goes through (:func:`evenhand.files.atomic.atomic_path`): ``.NAME.XXXX.tmp``."""


def _shown_path(path: Any) -> str:
    """``path`` as the user named it: an atomic write's temporary file becomes the file it was for."""
    p = Path(os.fsdecode(path))
    m = _TEMP_NAME.match(p.name)
    return str(p.with_name(m.group("name"))) if m else str(p)


def os_error_message(exc: OSError) -> str:
    """One line for an :class:`OSError`: the path it concerns, what went wrong and what to do."""
    if exc.errno is None:
        arg = str(exc.args[0]) if len(exc.args) == 1 else ""
        if isinstance(exc, FileNotFoundError) and arg and not any(c.isspace() for c in arg):
            return f"{_shown_path(arg)}: {_HINTS[errno.ENOENT]}"   # a library's bare path (pyarrow's)
        return str(exc)                                              # our own words
    path = _shown_path(exc.filename) if exc.filename is not None else None
    what = exc.strerror or str(exc)
    hint = _HINTS.get(exc.errno, "check the path and its disk")
    if exc.errno == errno.ENOENT:
        return f"{path}: {hint}" if path is not None else f"{what} ({hint})"
    where = f"{path}: " if path is not None else ""
    return f"{where}{what} ({hint})"


class NotWritableError(OSError):
    """An output path that cannot be written, found before the work that would fill it; its message is the
    one line the command prints (``path`` is the path)."""

    def __init__(self, path: str | Path, exc: OSError):
        reason = exc.strerror or str(exc)
        hint = _HINTS.get(exc.errno, "")
        if exc.errno in (errno.ENOENT, None):
            hint = "choose a location you can write, e.g. another --out"
        super().__init__(f"{path}: cannot be written: {reason}" + (f" ({hint})" if hint else ""))
        self.path = str(path)

    def __str__(self) -> str:
        return self.args[0]


def writable_dir(path: str | Path) -> Path:
    """Create the directory ``path`` and prove a file can be written in it, before any long work;
    :class:`NotWritableError` naming ``path`` otherwise (the command prints it on one line)."""
    p = Path(path)
    try:
        _probe_dir(p)
    except OSError as exc:
        raise NotWritableError(p, exc) from None
    return p


def _probe_dir(p: Path) -> None:
    p.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".evenhand-write-test.", dir=p)
    os.close(fd)
    os.unlink(probe)


def writable_file(path: str | Path) -> Path:
    """Prove that the file ``path`` can be written (its directory made, a probe file written beside it;
    the path is no directory), before any long work; :class:`NotWritableError` naming ``path`` otherwise."""
    p = Path(path)
    if p.is_dir():
        raise NotWritableError(p, OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
    try:
        _probe_dir(p.parent)
    except OSError as exc:
        raise NotWritableError(p, exc) from None
    if p.exists() and not os.access(p, os.W_OK):
        raise NotWritableError(p, OSError(errno.EACCES, os.strerror(errno.EACCES)))
    return p


_DIR_KINDS = {
    "compare_interventions": ("an interventions comparison (`evenhand compare CONFIG.yaml`)",
                              "its table is compare.csv; `evenhand power DIR` reads it; each cell's run is under cells/"),
    "sweep": ("a sweep of runs", "`evenhand figures DIR` draws it; each run is a subdirectory"),
    "mode_switch": ("a mode-switch study (`evenhand modes`)", "its table is mode_switch.csv"),
    "dose_response": ("a dose-response study", "its table is dose_response.csv (summary.csv beside it)"),
    "calibration": ("a calibration study", "its curve is in that directory's manifest and figures"),
    "bbq": ("a BBQ run (`evenhand bbq`)", "its table is bbq_scores.csv"),
    "probe_sweep": ("a probe sweep (`evenhand probe sweep`)", "its table is probes.csv"),
    "name_ablation": ("a name ablation (`evenhand probe ablation`)", "its table is ablation.csv"),
    "logit_attribution": ("a logit attribution (`evenhand probe attribution`)", "its table is attribution.csv"),
}


def not_a_run_message(path: str | Path, command: str, manifest_path: str | Path, needs: str = "metrics.json") -> str:
    """One line for a command that needs a finished run directory (one with ``needs``) given another
    path: what the path is (read from its manifest, ``RunDir(path).manifest_path``), and which command reads
    it."""
    p, mp = Path(path), Path(manifest_path)
    reads = (f"`evenhand {command}` reads a finished run directory (written by `evenhand run` or "
             f"`evenhand simulate`, with {needs})")
    if not p.exists():
        return f"{p}: no such directory; {reads}"
    if not p.is_dir():
        return f"{p}: a file, not a directory; {reads}"
    kind = None
    try:
        man = json.loads(mp.read_text())
        kind = man.get("kind") or (man.get("config") or {}).get("kind")
    except (OSError, ValueError, AttributeError):
        pass
    if kind in _DIR_KINDS:
        what, use = _DIR_KINDS[kind]
        return f"{p} is {what}, not a run directory: {use}; {reads}"
    if kind:
        return f"{p} holds a '{kind}' study, not a run directory; {reads}"
    if mp.exists():
        return f"{p}: a run directory without {needs} (unfinished or failed? `evenhand runs` lists it); {reads}"
    return f"{p}: no {needs} and no manifest.json, so not a run directory; {reads}"


def unicode_error_message(exc: UnicodeDecodeError, files: list[str]) -> str:
    """One line for a :class:`UnicodeDecodeError` while reading ``files`` (the command's input files)."""
    named = ", ".join(files) if files else "an input file"
    return (f"{named}: not valid {exc.encoding.upper()} text ({exc.reason} at byte {exc.start}); "
            f"save the file as UTF-8 and run the command again")


def unparseable_share(responses: "pd.DataFrame") -> float:
    """The share of ``responses`` rows without an A/B choice (``choice`` missing); 0 for no rows."""
    if not len(responses) or "choice" not in responses.columns:
        return 0.0
    return float(responses["choice"].isna().mean())


def warn_unparseable(responses: "pd.DataFrame", run: Any = None,
                     limit: float = UNPARSEABLE_LIMIT, part: str | None = None) -> str | None:
    """When more than ``limit`` of the answers in ``responses`` cannot be parsed, print a loud warning
    to stderr and append it to the manifest of ``run`` (a :class:`~evenhand.runs.rundir.RunDir`, or None) under
    ``warnings``. ``part`` names the part of a run the answers belong to (a comparison's cell, a mode):
    the manifest keeps one such warning per part. Returns the warning, or None."""
    share = unparseable_share(responses)
    if share <= limit:
        return None
    where = (f" of {part}" if part else "") + (f" in {run.path}" if run is not None else "")
    kinds = ""
    if "parse_verdict" in responses.columns:
        v = responses["parse_verdict"]
        kinds = f"; {(v == 'refusal').mean():.0%} declined, {(v == 'unparsed').mean():.0%} with no verdict found"
    msg = (f"{share:.0%} of {len(responses):,} answers{where} have no parseable A/B choice (more than "
           f"{limit:.0%}{kinds}): the model is not answering the questions (garbage or wrong weights, a base model, a "
           f"wrong chat template or too few new tokens?); the metrics rest on the few that parse")
    bar = "!" * 78
    print(f"\n{bar}\nWARNING: {msg}\n{bar}\n", file=sys.stderr, flush=True)
    if run is not None and run.exists():
        warnings = [w for w in (run.manifest().get("warnings") or [])
                    if not (w.get("kind") == "unparseable" and w.get("part") == part)]
        entry = {"kind": "unparseable", "share": round(share, 4), "n": len(responses), "message": msg}
        run.update_manifest(warnings=[*warnings, {**entry, "part": part} if part else entry])
    return msg
