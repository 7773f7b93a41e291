"""Machine-wide GPU leases: a GPU given to a trial of one experiment is not given to another's until released.

Standalone like ``keeper.py`` (stdlib only, Linux, Python >= 3.8): the manager imports it on this machine, the
keeper and the probe next to it on SSH hosts. Everything lives in one directory per machine
(``$TRIALFLEET_LEASE_DIR``, else ``/var/tmp/trialfleet-leases``), shared by every user and every experiment:

* ``gpu-<index>.<experiment>.<attempt>``: one trial's lease on one GPU, a JSON record of its holder inside (who
  holds it, for people and for ``trialfleet experiment list``). A lease is *live* while some process holds a
  shared ``flock`` on it: the manager from the moment it takes it until the trial ends, the trial's keeper
  (``keeper.hold_leases``) and the trial's own processes (the keeper passes the descriptor on) from their
  start. The kernel drops a lock when its last holder dies, however it dies (SIGKILL too), so a manager's crash loses no lease and a trial's end
  leaks none. A file nobody locks is left over from an ended trial and is removed by the next chooser.
* ``wait.<experiment>``: an experiment waiting for GPUs (since when, how many, when it last asked), held with a
  shared lock by its manager, so that freed GPUs go to the experiments that waited longest (turns: an experiment
  that got GPUs waits behind the others again).
* ``.lock``: taken exclusively while a chooser reads the leases, chooses and creates its own: two managers
  racing cannot both take GPU 0.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

DIRECTORY_VARIABLE = "TRIALFLEET_LEASE_DIR"
DEFAULT_DIRECTORY = "/var/tmp/trialfleet-leases"
CHOOSER_LOCK = ".lock"
LEASE_PREFIX = "gpu-"
WAIT_PREFIX = "wait."
#: an experiment that has not asked again for this long no longer waits (its trial was canceled, it ended)
WAIT_STALE_SECONDS = 10.0


def directory(explicit: str | None = None) -> str:
    """The lease directory of this machine, made (sticky, writable by all, like /tmp) if it is missing."""
    path = explicit or os.environ.get(DIRECTORY_VARIABLE) or DEFAULT_DIRECTORY
    if not os.path.isdir(path):
        with contextlib.suppress(FileExistsError):
            os.makedirs(path)
            with contextlib.suppress(OSError):  # a directory another user made stays theirs
                os.chmod(path, 0o1777)
    return path


@contextlib.contextmanager
def choosing(path: str):  # -> Iterator[None]
    """Hold the machine's chooser lock: nobody else reads, takes or removes leases meanwhile."""
    fd = os.open(os.path.join(path, CHOOSER_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # every user's chooser must open it (ours despite the umask)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def is_held(file_path: str) -> bool | None:
    """Does a live process hold ``file_path`` (a lease or a wait)? None: the file is gone."""
    try:
        fd = os.open(file_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _records(path: str, prefix: str, clean: bool) -> list:
    found: list = []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return found
    for name in names:
        if not name.startswith(prefix):
            continue
        file_path = os.path.join(path, name)
        held = is_held(file_path)
        if held is False and clean:
            with contextlib.suppress(OSError):  # another user's leftover in a sticky directory stays
                os.unlink(file_path)
        if not held:
            continue
        record = _read(file_path)
        if record is not None:
            record["file"] = name
            found.append(record)
    return found


def _read(file_path: str) -> dict | None:
    try:
        with open(file_path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def live_leases(path: str, clean: bool = False) -> list:
    """The live leases: ``{"gpu", "experiment", "trial", "attempt", "since", ...}`` each. ``clean`` (under
    :func:`choosing` only) removes the files nobody holds any more."""
    return [r for r in _records(path, LEASE_PREFIX, clean) if isinstance(r.get("gpu"), int)]


def live_waits(path: str, now: float | None = None, clean: bool = False) -> list:
    """The experiments waiting for GPUs that asked recently: ``{"experiment", "since", "seen", "count"}`` each,
    oldest first."""
    now = time.time() if now is None else now
    waits = [
        r for r in _records(path, WAIT_PREFIX, clean) if now - float(r.get("seen") or 0) <= WAIT_STALE_SECONDS
    ]
    return sorted(waits, key=lambda r: float(r.get("since") or 0))


def lease_name(gpu: int, experiment: str, attempt: str) -> str:
    return f"{LEASE_PREFIX}{gpu}.{experiment}.{attempt}"


def create_held(path: str, name: str, record: dict) -> int:
    """Create ``name`` holding a shared lock on it, its record written before it appears under its name; the
    descriptor (the caller's hold on it, not inherited by what it starts)."""
    tmp = os.path.join(path, f".{name}.{os.getpid()}")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.write(fd, json.dumps(record).encode())
        os.rename(tmp, os.path.join(path, name))
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd


def take(path: str, gpus: list, record: dict) -> list:
    """Lease ``gpus`` (under :func:`choosing`) for the trial ``record`` names; the descriptors holding them."""
    fds = []
    try:
        for gpu in gpus:
            name = lease_name(gpu, record["experiment"], record["attempt"])
            fds.append(create_held(path, name, dict(record, gpu=gpu, since=time.time())))
    except OSError:
        release(fds)
        raise
    return fds


def holder(lease: dict) -> str:
    """Who holds a lease, for a waiting trial's reason."""
    return f"experiment {lease.get('experiment')} (trial {lease.get('trial')})"


def take_chosen(path: str, record: dict, gpus: list, max_per_gpu: int):  # -> tuple[list, list] | str
    """Lease ``gpus``, chosen elsewhere (by a manager, from its last look at this host), to the trial ``record``
    names, if they are still free for it: none leased to another experiment, none with ``max_per_gpu`` leases
    already. The descriptors and the lease files, or why not."""
    experiment = record["experiment"]
    with choosing(path):
        held = live_leases(path, clean=True)
        for gpu in gpus:
            on_it = [lease for lease in held if lease["gpu"] == gpu]
            others = [lease for lease in on_it if lease.get("experiment") != experiment]
            if others:
                return f"GPU {gpu} is leased to {holder(others[0])}"
            if len(on_it) >= max_per_gpu:
                return f"GPU {gpu} has {len(on_it)} trial(s), the most allowed (maxTrialNumberPerGpu)"
        fds = take(path, gpus, record)
    return fds, [os.path.join(path, lease_name(gpu, experiment, record["attempt"])) for gpu in gpus]


def others_leases(path: str, experiment: str) -> dict:
    """``{gpu: holder}`` for the GPUs leased to another experiment's trials (a host's answer to a manager)."""
    return {
        str(lease["gpu"]): holder(lease)
        for lease in live_leases(path)
        if lease.get("experiment") != experiment
    }


def release(fds: list) -> None:
    """Let go of this process's hold; the lease ends once no other process holds it either."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def wait_record(experiment: str, count: int, since: float) -> dict:
    return {"experiment": experiment, "count": count, "since": since, "seen": time.time(), "pid": os.getpid()}


def wait_name(experiment: str) -> str:
    return f"{WAIT_PREFIX}{experiment}"
