"""Shared-storage safety for run directories: file modes that follow the umask, and the writer's lock.

``mkstemp`` creates files readable by their owner only (0600); a run directory on
shared storage must be readable by the team as the umask allows, so every file
written through :func:`evenhand.runs.rundir.atomic_path` is given ``0o666 & ~umask``
before it is renamed into place.

A run directory is written by one process at a time: :class:`RunLock` is the
file ``.lock`` in it, holding the writer's pid, host and start time. A second
writer is refused with :class:`LockHeld` naming the holder; a lock whose holder
is a dead process on this host is stale and is taken over (with a warning on
stderr); a lock from another host is never taken over, since its holder's
liveness cannot be checked from here.
"""
from __future__ import annotations

import json
import os
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

LOCK_NAME = ".lock"


def current_umask() -> int:
    """The process's umask (read from /proc where it exists, else set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode() -> int:
    """The mode a newly created regular file gets under the current umask (0644 under 022)."""
    return 0o666 & ~current_umask()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LockHeld(RuntimeError):
    """Another live process holds a run directory's lock."""


class RunLock:
    """The writer's lock of one run directory (``DIR/.lock``). Acquiring a lock this process already
    holds does nothing; releasing it removes the file."""

    _held: set[Path] = set()

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME

    def holder(self) -> dict | None:
        """The recorded holder (``pid``, ``host``, ``since``), or None without a readable lock file."""
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._key() in self._held

    def _key(self) -> Path:
        return self.directory.resolve()

    def _write(self) -> bool:
        """Create the lock file exclusively; False when it already exists."""
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
        return True

    def acquire(self) -> None:
        """Take the lock, or raise :class:`LockHeld` naming the live holder's pid and host. A lock left by a
        dead process on this host (or by this process) is taken over, saying so on stderr."""
        key = self._key()
        if key in self._held:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            if self._write():
                self._held.add(key)
                return
            who = self.holder() or {}
            pid, host = who.get("pid"), who.get("host")
            here = host == socket.gethostname()
            if not isinstance(pid, int):  # being written this instant, or unreadable: look again
                continue
            if here and pid == os.getpid():  # our own leftover (a run of this process that was not closed)
                self._held.add(key)
                return
            if here and not pid_alive(pid):
                print(f"evenhand: {self.path}: taking over a stale lock of pid {pid} on {host} "
                      f"(since {who.get('since')}; that process is gone)", file=sys.stderr)
                try:
                    self.path.unlink()
                except FileNotFoundError:
                    pass
                continue
            raise LockHeld(f"{self.directory} is being written by pid {pid} on host {host} "
                           f"(since {who.get('since')}); wait for it to finish, or, if that process is gone, "
                           f"delete {self.path}")
        raise LockHeld(f"{self.directory}: could not take the lock {self.path}; delete it if no run is writing there")

    def release(self) -> None:
        """Remove the lock file if this process holds it."""
        key = self._key()
        if key not in self._held:
            return
        self._held.discard(key)
        if (self.holder() or {}).get("pid") == os.getpid():
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
