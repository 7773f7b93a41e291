"""The manager's side of the trial directory protocol (docs/trial-directory.md), shared by every platform.

A trial directory holds what the manager writes before the trial starts (``parameter.cfg``, ``command.json``),
what the keeper writes while it runs (``launch.json``, ``keeper.json``, ``result.json``, the command's
``trial.stdout`` / ``trial.stderr``) and the trial's metric stream (``.nni/metrics``). The keeper's own helpers
(``trialfleet/trial_keeper/keeper.py``, stdlib only) are imported here rather than copied.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import re
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from trialfleet.errors import TrialFileRefusedError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.events import TrialEnded
from trialfleet.trial_keeper import keeper

KEEPER_PROTOCOL = keeper.PROTOCOL
#: what ``keeper.py --version`` prints; a worker whose keeper prints something else gets a new copy
KEEPER_VERSION = keeper.VERSION
KEEPER_SCRIPT = Path(keeper.__file__).resolve()

PARAMETER_FILE = "parameter.cfg"
COMMAND_FILE = "command.json"  # private (0600): it holds the trial's environment
LAUNCH_RECORD = "launch.json"
KEEPER_RECORD = "keeper.json"
RESULT_RECORD = "result.json"
METRICS_FILE = ".nni/metrics"
STDOUT_FILE = "trial.stdout"
STDERR_FILE = "trial.stderr"
#: records a previous launch of the same attempt may have left, removed before it is launched again
STALE_RECORDS = (KEEPER_RECORD, RESULT_RECORD, METRICS_FILE, STDOUT_FILE, STDERR_FILE)
#: what users and NNI's REST routes call the trial's outputs
FILE_ALIASES = {"stdout": STDOUT_FILE, "stderr": STDERR_FILE}
#: files of the trial directory that are never served (command.json may hold the relay's secret), at any depth:
#: a distributed trial's replicas have theirs below it, and their roles' commands are ``command.<role>.json``
PRIVATE_FILES = frozenset({COMMAND_FILE})
_PRIVATE_NAME = re.compile(r"command\.[^/]+\.json")
#: what a platform whose workers are elsewhere keeps here once a trial ended (its logs and records)
LOG_FILES = (STDOUT_FILE, STDERR_FILE, "trial.log", "keeper.log", KEEPER_RECORD, RESULT_RECORD)

_FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGFPE, signal.SIGBUS, signal.SIGILL}


def relative_file(name: str, trial_dir: object = "") -> str:
    """A file name a user asked for (``stdout``, ``trial.log``, ``sub/x.txt``) as a normalised path inside the
    trial directory; ValueError for one that leads outside it (absolute, or through ``..``),
    TrialFileRefusedError for a private one.

    Symbolic links a trial made inside its directory are checked where the file is read: see
    :func:`inside_trial_dir`.
    """
    relative = posixpath.normpath(FILE_ALIASES.get(name, name))
    if not name or posixpath.isabs(relative) or relative in (".", "..") or relative.startswith("../"):
        raise ValueError(f"{name!r} is not a file of the trial directory {trial_dir}")
    if is_private(relative):
        raise TrialFileRefusedError(f"{name} is the keeper's private input; it is not served")
    return relative


def is_private(relative: str) -> bool:
    name = posixpath.basename(relative)
    return name in PRIVATE_FILES or _PRIVATE_NAME.fullmatch(name) is not None


def inside_trial_dir(base: str, resolved: str, name: str) -> None:
    """Raise ValueError when ``resolved`` (a real path) is not below the real trial directory ``base``."""
    if resolved != base and not resolved.startswith(base.rstrip("/") + "/"):
        raise ValueError(f"{name!r} leads outside the trial directory {base}")


def refuse_private_target(base: str, resolved: str, name: str) -> None:
    """TrialFileRefusedError when the real path ``resolved`` (inside the real trial directory ``base``), which a
    symbolic link named ``name`` may lead to, is a private file: privacy is the file's, not the name's."""
    if is_private(posixpath.relpath(resolved, base)):
        raise TrialFileRefusedError(f"{_shown(name)} leads to the keeper's private input; it is not served")


def hard_link_refused(name: str) -> TrialFileRefusedError:
    return TrialFileRefusedError(
        f"{_shown(name)} is a hard link to the keeper's private input; it is not served"
    )


#: a shell command printing a private file of the trial directory ``{base}`` that is the same file as ``{path}``
#: (a hard link to it): how a trial directory read over SSH is checked, where SFTP tells no inode
SAME_PRIVATE_FILE = "find {base} -name 'command*.json' -samefile {path} -print -quit"


def open_trial_file(trial_dir: Path, name: str) -> BinaryIO:
    """Open a file of a trial directory on this machine for reading, links resolved: ValueError outside it,
    FileNotFoundError, TrialFileRefusedError for a private file (by the name asked, the file a link leads to,
    or a hard link to one), one that is not a regular file (a FIFO the trial made would block its reader for
    ever, a device would never end), a link loop or a name too long; their messages name no path."""
    base = trial_dir.resolve()
    try:
        path = (base / relative_file(name, base)).resolve()
        inside_trial_dir(str(base), str(path), name)
        refuse_private_target(str(base), str(path), name)
        f = keeper.open_regular(str(path), name)
    except keeper.NotRegularFile as exc:
        raise TrialFileRefusedError(str(exc)) from None
    except (RuntimeError, OSError) as exc:  # pathlib says RuntimeError for a loop it meets while resolving
        if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            raise
        errno_ = (exc.errno or 0) if isinstance(exc, OSError) else errno.ELOOP
        why = {errno.ELOOP: "is a symbolic link loop", errno.ENAMETOOLONG: "is too long a name"}
        raise TrialFileRefusedError(f"{_shown(name)} {why.get(errno_, 'cannot be read')}") from None
    if _links_private(f, base):
        f.close()
        raise hard_link_refused(name)
    return f


def _links_private(f: BinaryIO, base: Path) -> bool:
    """Whether the open file is a hard link to a private file anywhere in the trial directory (looked for only
    when the file has more than one link)."""
    opened = os.fstat(f.fileno())
    if opened.st_nlink < 2:
        return False
    for candidate in base.rglob("command*.json"):
        if not is_private(candidate.name):
            continue
        try:
            other = candidate.stat(follow_symlinks=False)
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (opened.st_dev, opened.st_ino):
            return True
    return False


def _shown(name: str) -> str:
    return repr(name if len(name) <= 40 else f"{name[:37]}...")


def read_local_file(trial_dir: Path, name: str) -> bytes:
    with open_trial_file(trial_dir, name) as f:
        return f.read()


def command_record(
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str] | None,
    *,
    env_unset: Sequence[str] = (),
    max_duration: float | None = None,
    kill_grace: float = 5.0,
    relay: Mapping[str, Any] | None = None,
    leases: Sequence[str] = (),
) -> dict[str, Any]:
    """``command.json``. The trial runs with the keeper's environment (the worker's: a login's, a Slurm job's,
    a container's) less ``env_unset``, plus ``env`` (see :func:`~.environment.environment_change`);
    ``relay``: where the keeper sends the trial's files (:meth:`~.relay.Relay.keeper_settings`); ``leases``:
    the GPU lease files the keeper holds while the trial runs (:mod:`~.gpu_leases`)."""
    record: dict[str, Any] = {
        "argv": list(argv),
        "cwd": cwd,
        "env": dict(env or {}),
        "env_unset": list(env_unset),
        "max_duration": max_duration,
        "kill_grace": kill_grace,
        "protocol": KEEPER_PROTOCOL,
    }
    if relay is not None:
        record["relay"] = dict(relay)
    if leases:
        record["leases"] = list(leases)
    return record


def input_files(parameter_record: str, command: Mapping[str, Any]) -> dict[str, str]:
    """The files a trial directory must hold before its keeper starts, by name."""
    return {PARAMETER_FILE: parameter_record, COMMAND_FILE: json.dumps(command)}


def write_trial_inputs(trial_dir: Path, files: Mapping[str, str]) -> None:
    """Prepare a trial directory on this machine: ``files`` written privately, ``.nni/``, no stale records."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    # a directory reused for the same attempt must not show the last run's records
    for stale in STALE_RECORDS:
        (trial_dir / stale).unlink(missing_ok=True)
    (trial_dir / ".nni").mkdir(exist_ok=True)
    for name, content in files.items():
        write_private(trial_dir / name, content)


def write_private(path: Path, content: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    """Write a JSON record the way the keeper does: temp file, fsync, rename."""
    keeper.write_json_atomically(str(path), dict(record))


def read_record(path: Path) -> dict[str, Any] | None:
    """keeper.json / result.json, or None while it does not exist (they are written atomically)."""
    try:
        with keeper.open_regular(str(path)) as f:
            data = json.loads(f.read())
    except (FileNotFoundError, keeper.NotRegularFile):
        return None
    return data if isinstance(data, dict) else None


def canceled_by_manager() -> dict[str, Any]:
    """The result.json the manager writes for a canceled trial whose keeper is gone."""
    record: dict[str, Any] = keeper.result_record("canceled", canceled=True, written_by="manager")
    return record


def ended_from_result(
    trial_id: str, result: Mapping[str, Any], cancel_status: TrialStatus | None = None
) -> TrialEnded:
    """The keeper's result.json → how the trial ended, for the manager. The trial can write its directory,
    so the record is read defensively: what is not a plausible value is left out, never trusted."""
    exit_code = _small_int(result.get("exit_code"))
    signo = _small_int(result.get("signal"))
    reason = str(result.get("reason") or "ended")[:500]
    end_time = result.get("end_time")
    plausible = isinstance(end_time, (int, float)) and not isinstance(end_time, bool) and 0 < end_time < 1e11
    when = float(end_time) if plausible and end_time is not None else time.time()

    def ended(status: TrialStatus, kind: FailureKind | None, message: str = reason) -> TrialEnded:
        return TrialEnded(trial_id, status, when, exit_code, message, kind)

    if result.get("canceled"):
        return ended(cancel_status or TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    if result.get("timed_out"):
        return ended(TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT)
    if exit_code == 0:
        return ended(TrialStatus.SUCCEEDED, None)
    if isinstance(exit_code, int):
        return ended(TrialStatus.FAILED, FailureKind.USER_CODE)
    if isinstance(signo, int):
        # a crash of the program itself is the user's; SIGKILL/SIGTERM from outside (OOM killer, admin) is not
        kind = FailureKind.USER_CODE if signo in _FAULT_SIGNALS else FailureKind.INFRASTRUCTURE
        return ended(TrialStatus.FAILED, kind, f"killed by signal {signo}")
    return ended(TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)


def _small_int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return value
    return None


def cut_short(trial_id: str, result: Mapping[str, Any], job: str) -> TrialEnded:
    """The trial keeper was signalled (not by trialfleet) and yet its job succeeded: another task of the job (a
    parameter server, a second task role, another replica) finished first, and the platform's completion policy
    ended the job, stopping this trial's command. A trial whose command did not finish is never SUCCEEDED; the
    policy is the user's to change, so no retry."""
    ended = ended_from_result(trial_id, result)
    return _cut(trial_id, str(ended.message), job, ended.timestamp, ended.exit_code)


def cut_short_unrecorded(trial_id: str, job: str) -> TrialEnded:
    """:func:`cut_short` when the keeper was ended before it could record it (a container whose first process
    ends on SIGTERM takes every other process of it down with SIGKILL)."""
    return _cut(trial_id, "its keeper was stopped before it recorded its end", job, time.time(), None)


def _cut(trial_id: str, how: str, job: str, timestamp: float, exit_code: int | None) -> TrialEnded:
    message = (
        f"the trial's command did not finish ({how}), yet its job succeeded ({job}): another task of the "
        "job finished first and the job's completion policy ended it; make the task that reports decide the job"
    )
    return TrialEnded(trial_id, TrialStatus.FAILED, timestamp, exit_code, message, FailureKind.USER_CODE)


def keeper_lost(trial_id: str, trial_dir: Path) -> TrialEnded:
    """A keeper gone without its final record: on a full device, that is why (the record could not be written)."""
    try:
        device = os.statvfs(trial_dir)
        full = device.f_bavail * device.f_frsize < NEARLY_FULL_BYTES
    except OSError:
        full = False
    if not full:
        return lost(trial_id)
    return lost(
        trial_id,
        "lost: the trial keeper left no final record: no space left on device (ENOSPC) in "
        f"{trial_dir}; what the trial reported is kept",
    )


NEARLY_FULL_BYTES = 1 << 20


def lost(
    trial_id: str, message: str = "lost: the trial keeper disappeared without a final record"
) -> TrialEnded:
    return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, FailureKind.INFRASTRUCTURE)
