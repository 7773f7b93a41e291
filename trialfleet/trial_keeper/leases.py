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
WAIT_STALE_SECONDS = 20.0


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
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(os.path.join(path, CHOOSER_LOCK), flags, 0o666)
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


def _names(path: str, prefix: str) -> list:
    try:
        return sorted(name for name in os.listdir(path) if name.startswith(prefix))
    except OSError:
        return []


def _records(path: str, prefix: str, clean: bool) -> list:
    found: list = []
    for name in _names(path, prefix):
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
    oldest first. A wait is held by its manager (this machine's) or, written by an SSH host's probe for a
    manager elsewhere, marked ``unheld``: then it lives as long as that manager keeps asking."""
    now = time.time() if now is None else now
    waits = []
    for name in _names(path, WAIT_PREFIX):
        file_path = os.path.join(path, name)
        held, record = is_held(file_path), _read(file_path)
        fresh = record is not None and now - float(record.get("seen") or 0) <= WAIT_STALE_SECONDS
        if record is not None and fresh and (held or record.get("unheld")):
            waits.append(record)
        elif clean and held is False:
            with contextlib.suppress(OSError):
                os.unlink(file_path)
    return sorted(waits, key=lambda r: float(r.get("since") or 0))


def turn_message(first: dict) -> str:
    """Why an experiment lets ``first``, which has waited longer, go first."""
    since = time.strftime("%H:%M:%S", time.localtime(float(first["since"])))
    return (
        f"its turn comes after experiment {first['experiment']}, which has waited for "
        f"{first.get('count')} GPU(s) since {since}"
    )


def lease_name(gpu: int, experiment: str, attempt: str) -> str:
    return f"{LEASE_PREFIX}{gpu}.{experiment}.{attempt}"


def create_held(path: str, name: str, record: dict) -> int:
    """Create ``name`` holding a shared lock on it, its record written before it appears under its name; the
    descriptor (the caller's hold on it, not inherited by what it starts)."""
    tmp = os.path.join(path, f".{name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):  # a leftover of a process with our pid
        os.unlink(tmp)
    # never through a link someone else put there: the directory is writable by all
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
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


def take_chosen(path: str, record: dict, gpus: list, max_per_gpu: int, usable=None):  # -> (list, list) | str
    """Lease ``gpus``, chosen elsewhere (by a manager, from its last look at this host), to the trial ``record``
    names, if they are still free for it (none leased to another experiment, none with ``max_per_gpu`` leases
    already) and it is its turn: ``usable``, the GPUs its manager may use, leave enough free for the
    experiments that have waited longer. The descriptors and the lease files; or why not, its wait noted."""
    experiment = record["experiment"]
    with choosing(path):
        held = live_leases(path, clean=True)
        why = _conflict(held, gpus, experiment, max_per_gpu) or _not_my_turn(
            path, held, experiment, usable, gpus
        )
        if why:
            _note_wait(path, experiment, len(gpus))
            return why
        fds = take(path, gpus, record)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, wait_name(experiment)))
    return fds, [os.path.join(path, lease_name(gpu, experiment, record["attempt"])) for gpu in gpus]


def _conflict(held: list, gpus: list, experiment: str, max_per_gpu: int) -> str | None:
    for gpu in gpus:
        on_it = [lease for lease in held if lease["gpu"] == gpu]
        others = [lease for lease in on_it if lease.get("experiment") != experiment]
        if others:
            return f"GPU {gpu} is leased to {holder(others[0])}"
        if len(on_it) >= max_per_gpu:
            return f"GPU {gpu} has {len(on_it)} trial(s), the most allowed (maxTrialNumberPerGpu)"
    return None


def _not_my_turn(path: str, held: list, experiment: str, usable, gpus: list) -> str | None:
    if usable is None:
        return None
    mine = _read(os.path.join(path, wait_name(experiment))) or {}
    since = float(mine.get("since") or time.time())
    waits = live_waits(path, clean=True)
    ahead = [w for w in waits if w.get("experiment") != experiment and float(w["since"]) < since]
    leased = {lease["gpu"] for lease in held}
    free = [gpu for gpu in usable if gpu not in leased]
    if not ahead or len(free) >= len(gpus) + sum(int(w.get("count") or 1) for w in ahead):
        return None
    return turn_message(ahead[0])


def _note_wait(path: str, experiment: str, count: int) -> None:
    """A manager elsewhere waits: its wait, kept while it asks again (its first ``since`` kept)."""
    mine = _read(os.path.join(path, wait_name(experiment)))
    now = time.time()
    fresh = mine is not None and now - float(mine.get("seen") or 0) <= WAIT_STALE_SECONDS
    since = float(mine["since"]) if fresh and mine is not None else now
    record = dict(wait_record(experiment, count, since), unheld=True)
    release([create_held(path, wait_name(experiment), record)])


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
