"""The messages for the faults a user meets: a full disk, an unwritable path, a file that is not
UTF-8, a run whose answers mostly cannot be parsed.

Each message is one line that names the file and says what to do; the command line prints it instead of
a traceback. :func:`warn_unparseable` is called where a run's responses are written.
"""
from __future__ import annotations

import errno
import sys
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
}


def os_error_message(exc: OSError) -> str:
    """One line for an :class:`OSError`: the path it concerns, what went wrong and what to do."""
    path = exc.filename if exc.filename is not None else None
    what = exc.strerror or str(exc)
    hint = _HINTS.get(exc.errno, "check the path and its disk")
    where = f"{path}: " if path is not None else ""
    return f"{where}{what} ({hint})"


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
    to stderr and append it to the manifest of ``run`` (a :class:`~evenhand.runs.RunDir`, or None) under
    ``warnings``. ``part`` names the part of a run the answers belong to (a comparison's cell, a mode):
    the manifest keeps one such warning per part. Returns the warning, or None."""
    share = unparseable_share(responses)
    if share <= limit:
        return None
    where = (f" of {part}" if part else "") + (f" in {run.path}" if run is not None else "")
    msg = (f"{share:.0%} of {len(responses):,} answers{where} have no parseable A/B choice (more than "
           f"{limit:.0%}): the model is not answering the questions (garbage or wrong weights, a base model, a "
           f"wrong chat template or too few new tokens?); the metrics rest on the few that parse")
    bar = "!" * 78
    print(f"\n{bar}\nWARNING: {msg}\n{bar}\n", file=sys.stderr, flush=True)
    if run is not None and run.exists():
        warnings = [w for w in (run.manifest().get("warnings") or [])
                    if not (w.get("kind") == "unparseable" and w.get("part") == part)]
        entry = {"kind": "unparseable", "share": round(share, 4), "n": len(responses), "message": msg}
        run.update_manifest(warnings=[*warnings, {**entry, "part": part} if part else entry])
    return msg
