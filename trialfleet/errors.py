"""The one error hierarchy of trialfleet.

::

    TrialfleetError
    ├── ConfigError                 bad experiment config: names the file, the key path, what was expected
    │   └── SearchSpaceError        bad search space: names the parameter and the rule broken
    ├── AlgorithmError              unknown or broken tuner/assessor (built-in name, className, classArgs)
    ├── CodeDirectoryError          code directory too big or unreadable (lists the biggest offenders)
    ├── StoreError                  the experiment database is missing, locked, corrupt or too new
    │   └── StoreBusyError          another process holds its write lock (the manager waits it out)
    ├── DirectoryError              a directory trialfleet writes cannot be used (names it and the cause)
    ├── NoSpaceError                no space left on the device of a file trialfleet writes (names the file)
    ├── ExperimentNotFoundError     no experiment matches an id (or the id is ambiguous)
    ├── ExperimentStateError        the operation is not allowed in the experiment's state (resume a running one…)
    ├── PlatformError               a training service failed as a whole (cannot start, host unreachable…)
    │   └── PlatformNotAvailableError   the platform is known to the schema but not implemented yet
    ├── ListenError                 the manager cannot listen where asked (--port, --host)
    │   └── PortInUseError          the manager's port is taken
    ├── TrialFileRefusedError       a trial file that is never served (command.json, a FIFO)
    ├── TensorboardError            TensorBoard cannot be started (not installed, a trial's files out of reach)
    └── ManagerUnreachableError     the CLI cannot talk to a running manager

A trial that crashes is data (FAILED with exit code and reason), never an exception.
Errors are translated at each boundary with ``raise ... from``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class TrialfleetError(Exception):
    """Base class of every error trialfleet raises on purpose."""

    exit_code = 1


class ConfigError(TrialfleetError):
    """An experiment config that cannot be used. Starts nothing.

    ``str()`` gives one readable block: ``<file>: <key.path>: <message>`` per problem.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        key_path: Sequence[str | int] | str | None = None,
        problems: Sequence[ConfigProblem] | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        if isinstance(key_path, str):
            self.key_path = key_path
        elif key_path:
            self.key_path = format_key_path(key_path)
        else:
            self.key_path = ""
        self.message = message
        self.problems: list[ConfigProblem] = list(problems or [])
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file or "<config>"
        if self.problems:
            lines = [f"{where}: {len(self.problems)} problem(s) in the experiment config:"]
            lines += [f"  - {p.key_path or '<top level>'}: {p.message}" for p in self.problems]
            return "\n".join(lines)
        if self.key_path:
            return f"{where}: {self.key_path}: {self.message}"
        return f"{where}: {self.message}"


class ConfigProblem:
    """One problem inside a config: where (key path) and what was expected."""

    __slots__ = ("key_path", "message")

    def __init__(self, key_path: str, message: str) -> None:
        self.key_path = key_path
        self.message = message

    def __repr__(self) -> str:
        return f"ConfigProblem({self.key_path!r}, {self.message!r})"


def format_key_path(parts: Sequence[str | int]) -> str:
    """``['trainingService', 'machineList', 0, 'host']`` → ``trainingService.machineList[0].host``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class SearchSpaceError(ConfigError):
    """A search space entry that breaks NNI's rules; names the parameter and the rule."""


class AlgorithmError(TrialfleetError):
    exit_code = 2


class CodeDirectoryError(TrialfleetError):
    exit_code = 2


class StoreError(TrialfleetError):
    pass


class StoreBusyError(StoreError):
    """Another process holds the write lock of the database at ``path``: a write of the manager's event loop,
    which never waits on a lock there, is tried again later (:mod:`trialfleet.storage.patience`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: the experiment database is locked by another process")


class DirectoryError(TrialfleetError):
    """TRIALFLEET_HOME or an experiment's working directory cannot be written: permission, read-only file system,
    not a directory. Raised before anything is created."""

    exit_code = 2


class NoSpaceError(TrialfleetError):
    """A write failed because the device holding ``path`` is full."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        super().__init__(f"no space left on device ({self.path})")


class ExperimentNotFoundError(TrialfleetError):
    exit_code = 2


class ExperimentStateError(TrialfleetError):
    exit_code = 2


class PlatformError(TrialfleetError):
    pass


class PlatformNotAvailableError(PlatformError):
    exit_code = 2


class ListenError(TrialfleetError):
    exit_code = 2


class PortInUseError(ListenError):
    pass


class TrialFileRefusedError(TrialfleetError):
    """A trial file that is never served: a private one (command.json) or not a regular file (a FIFO)."""


class ManagerUnreachableError(TrialfleetError):
    pass


class TensorboardError(TrialfleetError):
    """TensorBoard cannot be started for the chosen trials: the package is missing, no port is free."""
