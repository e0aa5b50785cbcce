"""What the CLI and more than one study share beyond the Study protocol: the output directory's check
(the run and modes studies, sweeps and `evenhand decide`/`cache`/`modes`). The CLI imports it from here,
never from a study's backend."""
from __future__ import annotations

from pathlib import Path

from evenhand.runs.rundir import RunError


def check_output_dir(path: str | Path) -> Path:
    """Create the directory and prove it is writable; raise RunError naming it otherwise."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise RunError(f"output_dir {p} is not writable: {exc.strerror or exc}") from None
    return p
