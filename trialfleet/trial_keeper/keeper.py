#!/usr/bin/env python3
"""trialfleet trial keeper: runs one trial command in its trial directory and records how it ended.

Usage: ``python3 -I -S keeper.py <trial_dir>`` or ``python3 keeper.py --version``; or forked, the same, by a
process that imported this module (:func:`fork_keeper`: the local keeper spawner, the SSH hosts' probe).

Standalone on purpose (stdlib only, Linux, Python >= 3.8): it is copied to SSH hosts and cluster nodes where
nothing of trialfleet is installed. The protocol is described in docs/trial-directory.md:

* reads ``command.json``: ``{"argv", "cwd", "env", "env_unset", "max_duration", "kill_grace", "protocol": 2}``
  (and ``"leases"``: the GPU lease files it holds for the trial, see ``leases.py``);
  the command gets the keeper's own environment less ``env_unset``, plus ``env`` (so the file holds only what
  trialfleet adds, never the worker's secrets)
* the command writes ``trial.stdout`` / ``trial.stderr`` itself (opened O_APPEND; nothing flows through here)
* writes ``keeper.json`` once the command runs and ``result.json`` once it ended (temp file + fsync + rename)

SIGTERM, SIGINT or SIGHUP cancel the trial (also when the trial failed first, the cancel arriving before the
record: a whole group stopped at once); past ``max_duration`` it times out. In both cases, and also after a
normal exit (stragglers left in the background), the whole process tree gets SIGTERM, then SIGKILL after
``kill_grace`` seconds. The tree is the command's process group (and any session it leads) plus every
descendant of the keeper, which makes itself a child subreaper so that processes that detach (setsid, double
fork) are re-parented to it instead of escaping to init. Every process of the trial is also found by something
that survives the keeper's own death: a cgroup v2 of its own where the keeper may create one, and in any case the
environment variable TRIALFLEET_TRIAL_MARKER with a value unique to the attempt (both are in launch.json and
keeper.json, for whoever ends the trial without its keeper). The keeper never writes to its own stdio: its
parent may be gone.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import select
import signal
import stat
import sys
import time

PROTOCOL = 2
VERSION = "trialfleet-keeper 1.1 protocol 2"
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WATCHED = (signal.SIGCHLD, *CANCEL_SIGNALS)
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NAME = 15
SIGKILL_WAIT = 10.0  # after SIGKILL, how long to wait for processes stuck in the kernel (D state)
MARKER_VARIABLE = "TRIALFLEET_TRIAL_MARKER"


def write_json_atomically(path: str, data: dict, durable: bool = True) -> None:
    """Temp file + rename, so readers never see half a record; ``durable`` also survives a host crash."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, path)
    if not durable:
        return
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself must survive a host crash
    finally:
        os.close(dir_fd)


RESULT_RESERVE = "result.reserve"
RESERVE_SIZE = 16384  # a result record takes a few hundred bytes
NO_SPACE = "no space left on device (ENOSPC) in the trial directory"
NEARLY_FULL = 1 << 20


def reserve_result_space(trial_dir: str) -> None:
    """Room for result.json on a disk the trial may fill up: a file of spaces, written over in place then."""
    with contextlib.suppress(OSError), open(os.path.join(trial_dir, RESULT_RESERVE), "wb") as f:
        f.write(b" " * RESERVE_SIZE)
        f.flush()
        os.fsync(f.fileno())


def write_result(trial_dir: str, record: dict) -> None:
    """result.json, also on a full disk: then written over the reserve's spaces (whitespace after a JSON
    document is still JSON), which takes no new block, and saying that the disk was full."""
    path = os.path.join(trial_dir, "result.json")
    reserve = os.path.join(trial_dir, RESULT_RESERVE)
    if record.get("exit_code") != 0 and not record.get("canceled") and _nearly_full(trial_dir):
        record = dict(record, disk_full=True, reason=f"{record['reason']}; {NO_SPACE}")
    try:
        write_json_atomically(path, record)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not os.path.exists(reserve):
            raise
        with contextlib.suppress(OSError):
            os.unlink(f"{path}.tmp.{os.getpid()}")
        if not record.get("disk_full"):
            record = dict(record, disk_full=True, reason=f"{record['reason']}; {NO_SPACE}")
        with open(reserve, "r+b") as f:
            f.write(json.dumps(record).encode()[:RESERVE_SIZE])
            f.flush()
            os.fsync(f.fileno())
        os.rename(reserve, path)
        return
    with contextlib.suppress(OSError):
        os.unlink(reserve)


def _nearly_full(directory: str) -> bool:
    try:
        device = os.statvfs(directory)
    except OSError:
        return False
    return device.f_bavail * device.f_frsize < NEARLY_FULL


def proc_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat split after the command name: item 0 is field 3 (state), item n is field n + 3."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    fields = proc_fields(pid)
    return int(fields[19]) if fields else None


@functools.lru_cache(maxsize=None)  # noqa: UP033 - functools.cache is 3.9+; the keeper runs on 3.8
def boot_id() -> str:
    """This boot's id: read once per process (a process does not outlive its boot), since the manager asks it
    for every live trial at every look."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def prctl(option: int, arg: object) -> bool:
    """Linux's prctl(2) through the C library; False where it failed or cannot be called."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError, TypeError):
        return False


def become_subreaper() -> bool:
    """Make this process a child subreaper; True if it is one. Every process of the trial then stays a
    descendant of the keeper for as long as the keeper lives: an orphan is re-parented to it, not to init.
    Without it the group/session scan still finds most of the tree."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


class LineReader:
    """Newline-ended requests on a file descriptor, for a long-lived process that also has other work (the
    spawner, a serving probe): ``lines(timeout)`` waits at most ``timeout`` seconds and returns the complete,
    non-blank lines that arrived (maybe none), or None at EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._pending = b""

    def lines(self, timeout: float):  # -> list[bytes] | None
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return None
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        return [line for line in complete if line.strip()]


def reap_exited_children() -> list:
    """Reap every child that has exited, without waiting: a long-lived process that forks keepers (the spawner,
    a serving probe, a reuse-mode worker) leaves none of them a zombie. Returns their pids."""
    reaped: list[int] = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


def set_process_name(name: bytes) -> None:
    """This process's name (``/proc/self/comm``, at most 15 bytes), where the C library lets us set it."""
    prctl(PR_SET_NAME, name[:15])  # ctypes passes bytes as a char pointer


def live_descendants(pid: int) -> set | None:
    """The live (non-zombie) descendants of ``pid``, read from its threads' ``children`` files rather than by
    a scan of every process; None where the kernel has no such file."""
    found: set = set()
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # ended meanwhile
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except FileNotFoundError:
                if parent == pid and tid == str(pid):
                    return None
                continue
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    stack.append(kid)
    return {p for p in found if (fields := proc_fields(p)) is not None and fields[0] != "Z"}


def process_alive(pid: int | None, ticks: int | None, boot: str | None = None) -> bool:
    """Is the process that started at ``ticks`` (on the boot ``boot``) still there: not a zombie, not a reused pid?"""
    if not pid or (boot is not None and boot != boot_id()):
        return False
    fields = proc_fields(pid)
    return fields is not None and fields[0] != "Z" and (ticks is None or int(fields[19]) == ticks)


def trial_tree(
    leader: int,
    also_below: tuple = (),
    leader_ticks: int | None = None,
    marker: str | None = None,
    cgroup: str | None = None,
) -> set:
    """Live (non-zombie) processes of a trial: the process group and session ``leader`` leads, the members of
    its ``cgroup``, the processes whose environment holds its ``marker``, and every descendant of them and of
    ``also_below`` (the keeper, whose re-parented orphans are the trial's too).

    ``leader_ticks``: the leader's start time; when the pid now belongs to another process, its old group and
    session are gone (Linux keeps those ids busy while any member lives) and only the rest is searched.
    """
    table = {}
    for name in os.listdir("/proc"):
        fields = proc_fields(int(name)) if name.isdigit() else None
        if fields:
            table[int(name)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    children: dict = {}
    for pid, (_, ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    reused = leader in table and leader_ticks is not None and table[leader][4] != leader_ticks
    found = (
        set() if reused or not leader else {pid for pid, row in table.items() if leader in (row[2], row[3])}
    )
    found |= (cgroup_members(cgroup) | marked(marker, table)) & set(table)
    stack = [*also_below, *found]
    while stack:
        for kid in children.get(stack.pop(), ()):
            if kid not in found:
                found.add(kid)
                stack.append(kid)
    found.discard(os.getpid())
    return {pid for pid in found if table[pid][0] != "Z"}


def marked(marker: str | None, pids) -> set:
    """The processes among ``pids`` whose environment holds ``marker`` (those this user may read)."""
    if not marker:
        return set()
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue
    return found


# ---- cgroup v2: where the keeper may create one, every process of the trial stays in it -----------------


def own_cgroup() -> str | None:
    """This process's cgroup v2 directory, or None without a cgroup v2 hierarchy."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line.rstrip("\n")[3:] for line in f if line.startswith("0::")), None)
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f if " - cgroup2 " in line]
    except OSError:
        return None
    for fields in mounts:
        root, mount_point = fields[3], fields[4]
        if path is not None and (path + "/").startswith(root.rstrip("/") + "/"):
            return os.path.join(mount_point, path[len(root.rstrip("/")) :].lstrip("/"))
    return None


def make_cgroup(marker: str) -> str | None:
    """A new cgroup below the keeper's for the trial, or None where this user may not make and fill one."""
    base = own_cgroup()
    if base is None or not os.access(os.path.join(base, "cgroup.procs"), os.W_OK):
        return None
    path = os.path.join(base, f"trialfleet-{marker}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
        remove_cgroup(path)
        return None
    return path


def move_into_cgroup(path: str | None, leader: int, rounds: int = 5, subreaper: bool = False) -> None:
    """Move the running trial command, and whatever it forked already, into the trial's cgroup ``path``.

    Done from the keeper once the command runs, not in the child before its exec: a cgroup migration waits for
    an RCU grace period (12-18 ms here), which the trial's start waited for too. A process forked while its
    parent was being moved stays where it was, so the trial's processes are looked at again until all of them
    are in, a few ``rounds`` at most: its session and every descendant of the keeper (a subreaper: what detached
    was re-parented to it), which reads no other process's environment; for a ``subreaper`` keeper its
    descendants alone, from their parents' ``children`` files. One not moved (this user may not move it) is
    still found by its marker.
    """
    if not path:
        return
    try:
        fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
    except OSError:
        return
    try:
        outside = [leader]
        for _ in range(rounds):
            for pid in outside:
                with contextlib.suppress(OSError):  # ended meanwhile
                    os.write(fd, str(pid).encode())
            tree = live_descendants(os.getpid()) if subreaper else None
            if tree is None:
                tree = trial_tree(leader, (os.getpid(),))
            outside = sorted(tree - cgroup_members(path))
            if not outside:
                return
    finally:
        os.close(fd)


def cgroup_members(path: str | None) -> set:
    if not path:
        return set()
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return {int(line) for line in f if line.strip()}
    except (OSError, ValueError):
        return set()


def remove_cgroup(path: str | None) -> None:
    if path:
        with contextlib.suppress(OSError):  # not empty yet, or already gone
            os.rmdir(path)


def send(pids: set, *signals: int) -> None:
    for pid in pids:
        for sig in signals:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


def end_tree(members, grace: float, pause=time.sleep) -> None:
    """SIGTERM every process ``members()`` lists, SIGKILL what is left after ``grace`` seconds, and wait for
    processes stuck in the kernel up to SIGKILL_WAIT. ``pause(seconds)`` waits between looks."""
    deadline = time.monotonic() + grace
    signalled: set = set()
    alive = members()
    while alive and time.monotonic() < deadline:
        send(alive - signalled, signal.SIGTERM, signal.SIGCONT)
        signalled |= alive
        pause(0.05)
        alive = members()
    deadline = time.monotonic() + SIGKILL_WAIT
    while alive and time.monotonic() < deadline:
        send(alive, signal.SIGKILL)
        pause(0.05)
        alive = members()


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a socket, a device, a directory)."""


def open_regular(path: str, name: str = ""):  # -> BinaryIO
    """Open a regular file for reading, never waiting: a FIFO opens at once here (O_NONBLOCK) and is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        )
        raise NotRegularFile(f"{name or path} is {kind}; only regular files are read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_record(path: str) -> dict | None:
    """A JSON record of the trial directory, or None (missing, being replaced, not a record)."""
    try:
        with open_regular(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def end_without_keeper(trial_dir: str, canceled: bool, grace: float) -> None:
    """Do the job of a keeper that died or does not answer: end every process of the trial (found by the
    records it left) and, for a cancel, record that the manager canceled it."""
    record = read_record(os.path.join(trial_dir, "keeper.json"))
    record = record or read_record(os.path.join(trial_dir, "launch.json")) or {}
    if record.get("boot_id") == boot_id():
        pid, ticks, cgroup = record.get("pid") or 0, record.get("start_ticks"), record.get("cgroup")
        end_tree(lambda: trial_tree(pid, (), ticks, record.get("marker"), cgroup), grace)
        remove_cgroup(cgroup)
    result = os.path.join(trial_dir, "result.json")
    if canceled and read_record(result) is None:
        write_json_atomically(result, result_record("canceled", canceled=True, written_by="manager"))


class Trial:
    def __init__(self, pid: int, marker: str, cgroup: str | None, subreaper: bool = False) -> None:
        self.pid = pid
        self.marker = marker
        self.cgroup = cgroup
        self.subreaper = subreaper  # the keeper is one: the trial's processes are all its descendants
        self.status: int | None = None  # raw wait status of the command, once reaped
        self.childless = False  # the last reap found no child at all

    def reap(self) -> None:
        """Reap every exited child (re-parented orphans too); remember the command's own status."""
        self.childless = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.childless = True
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = status

    def supervise(self, max_duration: float | None) -> str | None:
        """Wait until the command exits (None), a cancel signal arrives ("canceled") or time is up ("timeout")."""
        deadline = None if max_duration is None else time.monotonic() + max_duration
        while True:
            self.reap()
            if self.status is not None:
                return None
            timeout = 3600.0 if deadline is None else deadline - time.monotonic()
            if timeout <= 0:
                return "timeout"
            info = signal.sigtimedwait(WATCHED, timeout)
            if info is not None and info.si_signo != signal.SIGCHLD:
                return "canceled"

    def end_tree(self, grace: float) -> None:
        """SIGTERM every process of the trial, SIGKILL what is left after ``grace`` seconds."""
        self.reap()
        if self.subreaper and self.childless:  # no child, so no descendant: nothing of the trial is left
            remove_cgroup(self.cgroup)
            return
        me = os.getpid()
        members = lambda: trial_tree(self.pid, (me,), marker=self.marker, cgroup=self.cgroup)  # noqa: E731
        end_tree(members, grace, pause=self._pause)
        self.reap()
        remove_cgroup(self.cgroup)

    def _pause(self, seconds: float) -> None:
        signal.sigtimedwait((signal.SIGCHLD,), seconds)
        self.reap()


def describe_end(status: int | None, cause: str | None, max_duration: float | None) -> dict:
    exit_code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    signo = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    if cause == "canceled":
        reason = "canceled"
    elif cause == "timeout":
        reason = f"timeout after {max_duration:g}s"
    elif signo is not None:
        reason = f"killed by signal {signo}"
    else:
        reason = f"exit code {exit_code}"
    fields = {"exit_code": exit_code, "signal": signo}
    return result_record(reason, canceled=cause == "canceled", timed_out=cause == "timeout", **fields)


def result_record(reason: str, **fields: object) -> dict:
    record: dict = {"protocol": PROTOCOL, "exit_code": None, "signal": None, "end_time": time.time()}
    record.update(reason=reason, canceled=False, timed_out=False)
    record.update(fields)
    return record


def keeper_record(pid: int, launch: dict) -> dict:
    return {
        **launch,
        "pid": pid,
        "pgid": pid,  # the command leads a process group of its own
        "start_ticks": start_ticks(pid),
        "hostname": os.uname().nodename,
        "start_time": time.time(),
    }


def hold_leases(paths) -> list:
    """Hold the GPU leases the manager took for this trial (``trial_keeper/leases.py``): a shared ``flock`` on
    each, beside the manager's, so that they outlive the manager and end with the trial. The descriptors are
    inheritable: the trial's processes hold them too, should the keeper die before them. OSError if one is
    gone (its manager died before the keeper started and another chooser removed it)."""
    import fcntl

    fds: list = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_RDONLY))
            fcntl.flock(fds[-1], fcntl.LOCK_SH | fcntl.LOCK_NB)
            os.set_inheritable(fds[-1], True)
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def open_output(trial_dir: str, name: str) -> int:
    return os.open(os.path.join(trial_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def command_env(command: dict, marker: str) -> dict:
    """The keeper's environment less ``env_unset``, plus ``env`` and the trial's marker."""
    env = dict(os.environ)
    for name in command.get("env_unset") or ():
        env.pop(name, None)
    env.update(command.get("env") or {})
    env[MARKER_VARIABLE] = marker
    return env


def start(command: dict, trial_dir: str, marker: str, keep: tuple = ()) -> int:
    """Start the trial command; its pid. It gets what ``subprocess.Popen`` would give it (stdin on /dev/null,
    SIGPIPE and SIGXFSZ back to their defaults, no descriptor of the keeper's but stdio), and also an empty
    signal mask (the keeper blocks the signals it waits for) and a process group of its own in the keeper's
    session. Where the local platform's spawner forks the keepers, an experiment's keepers and trials are that
    one session, which Linux's autogroup scheduler weighs as one against the manager's (trials filling every core
    left the manager 1/9 of the CPU at concurrency 8, and its REST answers waited for it).

    ``os.posix_spawn`` (vfork and exec: 0.6 ms here), since Popen sets a signal mask only from a ``preexec_fn``,
    which makes it fork the whole keeper and run Python in the child (2.3 ms), and that before every trial.
    ``keep``: descriptors the command inherits after all (its GPU leases)."""
    env = command_env(command, marker)
    argv = command["argv"]
    out, err = open_output(trial_dir, "trial.stdout"), open_output(trial_dir, "trial.stderr")
    with contextlib.suppress(OSError):  # NNI's name for the trial's output, which its users' scripts read
        os.symlink("trial.stdout", os.path.join(trial_dir, "trial.log"))
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out, 1),
        (os.POSIX_SPAWN_DUP2, err, 2),
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in inherited_descriptors() if fd not in (out, err, *keep)),
    ]
    here = os.open(".", os.O_PATH | os.O_DIRECTORY)  # needs no permission on the directory
    try:
        os.chdir(command["cwd"])  # the spawned command's, as Popen's cwd is: then the keeper's again
        executable = find_program(argv[0], env)
        try:
            return os.posix_spawn(
                executable,
                argv,
                env,
                file_actions=actions,
                setpgroup=0,
                setsigmask=(),
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except OSError as exc:
            exc.filename = exc.filename or executable
            raise
    finally:
        os.fchdir(here)
        for fd in (here, out, err):
            os.close(fd)


def find_program(name: str, env: dict) -> str:
    """Where ``name`` is, looked up as Popen looks it up: in the PATH of the command's environment unless the
    name has a slash (relative names from the current directory, the command's)."""
    if os.path.dirname(name):
        return name
    for directory in os.get_exec_path(env):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise FileNotFoundError(2, "No such file or directory", name)


def inherited_descriptors() -> list:
    """This process's open descriptors above stdio that a spawned program would inherit (what started the
    keeper may have left some open); Python's own are closed on exec already."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                if os.get_inheritable(fd):
                    found.append(fd)
    return found


def forwarder_for(trial_dir: str, command: dict):  # -> Forwarder | None
    """The relay forwarder when the manager reads this trial's files through its relay (see forwarder.py)."""
    if not command.get("relay"):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)  # -I leaves the script's directory out
    from forwarder import Forwarder

    forwarder = Forwarder(trial_dir, command["relay"])
    forwarder.start()
    return forwarder


def run(trial_dir: str) -> None:
    with open(os.path.join(trial_dir, "command.json")) as f:
        command = json.load(f)
    if command.get("protocol") != PROTOCOL:
        raise ValueError(
            f"command.json has protocol {command.get('protocol')!r}, this keeper speaks {PROTOCOL}; "
            "the manager and the keeper on this worker are of different trialfleet versions"
        )
    forwarder = forwarder_for(trial_dir, command)
    try:
        supervised(trial_dir, command, forwarder)
    except Exception as exc:  # whatever went wrong must end up in result.json, forwarded too
        record_error(trial_dir, exc)
        raise KeeperFailed from exc
    finally:
        if forwarder is not None:
            forwarder.finish()


class KeeperFailed(Exception):
    """The keeper failed after recording why in result.json."""


def record_error(trial_dir: str, exc: BaseException) -> None:
    write_result(trial_dir, result_record(f"keeper error: {exc}", error=repr(exc)))


def supervised(trial_dir: str, command: dict, forwarder) -> None:  # forwarder: Forwarder | None
    if set(CANCEL_SIGNALS) & signal.sigpending():
        write_result(trial_dir, result_record("canceled", canceled=True))
        return
    subreaper = become_subreaper()
    # written before the command exists: whoever finds this attempt already launched adopts this keeper
    me = os.getpid()
    marker = os.urandom(8).hex()
    cgroup = make_cgroup(marker)
    launch = {
        "protocol": PROTOCOL,
        "keeper_pid": me,
        "keeper_start_ticks": start_ticks(me),
        "boot_id": boot_id(),
        "marker": marker,
        "cgroup": cgroup,
    }
    # launch.json and keeper.json describe live processes, which a host crash ends anyway (the boot id tells
    # a restarted manager so): their fsyncs bought nothing and cost ~10 ms before every trial could start
    write_json_atomically(os.path.join(trial_dir, "launch.json"), launch, durable=False)
    reserve_result_space(trial_dir)
    try:
        lease_fds = hold_leases(command.get("leases") or ())
        pid = start(command, trial_dir, marker, tuple(lease_fds))
    except (OSError, ValueError) as exc:
        with open(os.path.join(trial_dir, "trial.stderr"), "a") as f:
            f.write(f"trialfleet: could not start the trial command: {exc}\n")
        write_result(trial_dir, result_record(f"could not start: {exc}", error=str(exc)))
        remove_cgroup(cgroup)
        return
    record = keeper_record(pid, launch)
    write_json_atomically(os.path.join(trial_dir, "keeper.json"), record, durable=False)
    if forwarder is not None:
        forwarder.send_record("keeper.json")
    move_into_cgroup(cgroup, pid, subreaper=subreaper)
    trial = Trial(pid, marker, cgroup, subreaper)
    cause = trial.supervise(command.get("max_duration"))
    trial.end_tree(float(command.get("kill_grace", 5)))
    if cause is None and trial.status != 0 and set(CANCEL_SIGNALS) & signal.sigpending():
        # the trial ended with a cancel of its keeper on the way: it was stopped from outside as a group
        # (scancel and a pod's deletion signal every process of the session), and the trial's own death by
        # that signal only came first
        cause = "canceled"
    write_result(trial_dir, describe_end(trial.status, cause, command.get("max_duration")))


def keep(trial_dir: str) -> int:
    """Run the trial of ``trial_dir`` to its end and record it; the keeper's exit code. The cancel signals
    must be blocked already (from the process's first instruction: a cancel sent early is not lost)."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(trial_dir)
    except KeeperFailed:
        return 1
    except Exception as exc:  # whatever went wrong must end up in result.json
        record_error(trial_dir, exc)
        return 1
    return 0


def fork_keeper(trial_dir: str, inherit: tuple = ()) -> int:
    """Start the keeper of ``trial_dir`` as a fork of this process, which must be single-threaded and have
    imported this module: no interpreter starts. The child is what ``python3 -I -S keeper.py <trial_dir>``
    would be, but in this process's session (a process group of its own): the cancel signals blocked from
    birth, stdin on /dev/null, stdout and stderr on ``keeper.log`` and nothing else of this process open.
    ``inherit``: descriptors it keeps open after all (the GPU leases its parent took for it: held from its birth).
    Returns its pid."""
    log = os.open(os.path.join(trial_dir, "keeper.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; what it does is seen in its trial directory
            code = 1
            try:
                os.setpgid(0, 0)
                set_process_name(b"trial-keeper")  # its command line stays its parent's: ps -e tells it so
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                for name in os.listdir("/proc/self/fd"):
                    if int(name) > 2 and int(name) not in inherit:
                        with contextlib.suppress(OSError):
                            os.close(int(name))
                for number in WATCHED:
                    signal.signal(number, signal.SIG_DFL)
                code = keep(trial_dir)
            finally:
                os._exit(code)
        return pid
    finally:
        os.close(log)
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--version"]:
        print(VERSION)
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: keeper.py <trial_dir> | --version\n")
        return 2
    # block before anything else, so that a cancel arriving during start-up is not lost
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    return keep(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
