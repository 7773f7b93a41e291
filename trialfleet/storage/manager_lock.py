"""One manager per experiment: an ``flock`` on ``<experiment dir>/manager.lock``, held for the manager's life.

The kernel releases it the moment the manager dies — ``kill -9`` included, before anyone reaps the process
(once its last thread has exited: under load that can be a moment after ``ps`` shows the process a zombie) —
so "is a manager running this experiment?" is answered by the lock, never by a pid that may be a zombie or
reused. A second ``resume`` started at the same time as the first finds the lock taken and refuses, naming the
pid written in the file by the holder. The descriptor is not inherited by trials.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from trialfleet.errors import ExperimentStateError

LOCK_FILE = "manager.lock"


class ManagerLock:
    """The lock of one experiment's directory; :meth:`acquire` holds it until :meth:`release` or exit."""

    def __init__(self, experiment_dir: Path) -> None:
        self.path = Path(experiment_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ExperimentStateError naming the manager that has it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise ExperimentStateError(
                f"another manager (pid {holder}) runs the experiment in {self.path.parent}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None


def manager_running(experiment_dir: Path) -> bool:
    """Whether a manager holds the experiment's lock right now."""
    try:
        fd = os.open(Path(experiment_dir) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock just taken
    return False
