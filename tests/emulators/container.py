"""A container's command run as a local process, the way every emulator's "kubelet" runs its tasks.

A real cluster starts each task in a container: a fresh environment holding the platform's variables, and the
cluster's storage mounted at the container's paths. Here the image is ignored and the command runs on this
machine, but the rest is kept: the process starts in a private mount namespace (``unshare --mount``) where every
:class:`Mount` is bind-mounted at its container path, so a client that hands the job a path of its own machine
instead of the container's fails here as it would on the cluster. Without root the namespace is a user
namespace mapping the caller to root (``unshare --user --map-root-user``), which still allows bind mounts.

Mount points that do not exist are created on this machine (a mount needs a directory to cover) and removed
again, when empty, by :func:`remove_created_mountpoints` (emulators call it when they stop; also at exit).

Exit codes follow container runtimes: a command killed by signal N exits 128 + N; a command that cannot be
found exits 127, one that cannot be executed 126.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: what a container's process starts with before the platform adds its variables (the image's environment)
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")

# runs inside the new mount namespace: bind every mount, then exec the command
_LAUNCH = """
import json, os, subprocess, sys
spec = json.loads(sys.argv[1])
for mount in spec["mounts"]:
    subprocess.run(["mount", "--bind", mount["source"], mount["target"]], check=True)
    if mount["read_only"]:
        subprocess.run(["mount", "-o", "remount,bind,ro", mount["target"]], check=True)
os.chdir(spec["cwd"])
try:
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
except FileNotFoundError:
    sys.stderr.write('exec: "%s": executable file not found in $PATH\\n' % spec["argv"][0])
    os._exit(127)
except OSError as error:  # not executable, or not a program (exec format error)
    sys.stderr.write('exec: "%s": %s\\n' % (spec["argv"][0], error.strerror))
    os._exit(126)
"""

_created: list[Path] = []
_created_lock = threading.Lock()


@dataclass(frozen=True)
class Mount:
    source: Path  # a directory (or a single file) of this machine
    target: str  # the absolute path the container sees it at
    read_only: bool = False


def container_env(variables: Mapping[str, str], *, home: str = "/root") -> dict[str, str]:
    """A container's environment: the image's basics (this machine's PATH, so ``python3`` is found) and ``variables``."""
    env = {key: os.environ[key] for key in BASE_ENV_KEYS if key in os.environ}
    env["HOME"] = home
    env.update(variables)
    return env


def _make_mountpoint(target: str, *, file: bool = False) -> None:
    """Create what a bind mount needs to cover: a directory, or an empty file when a file is mounted."""
    path = Path(target)
    if not path.is_absolute():
        raise ValueError(f"mount target {target!r} is not an absolute path")
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for index, created in enumerate(reversed(missing)):
        if file and index == len(missing) - 1:
            created.touch()
        else:
            created.mkdir()
        with _created_lock:
            _created.append(created)


def _mounted_somewhere() -> set[str]:
    """Every mount point of every mount namespace this process can see into (/proc/<pid>/mountinfo)."""
    points: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (entry / "mountinfo").read_text().splitlines():
                fields = line.split(" ")
                if len(fields) > 4:
                    points.add(fields[4].replace("\\040", " ").replace("\\134", "\\"))
    return points


def remove_created_mountpoints() -> None:
    """Remove the mount points this process created, deepest first, where nothing was left in them.

    One still covered by a mount in any namespace (a container of another emulator, of this process or another,
    still running) is left: removing a directory that is a mount point elsewhere detaches those mounts.
    """
    with _created_lock:
        pending = sorted(_created, key=lambda p: len(p.parts), reverse=True)
        _created.clear()
    in_use = _mounted_somewhere() if pending else set()
    for created in pending:
        if str(created) in in_use:
            continue
        with contextlib.suppress(OSError):
            if created.is_dir():
                created.rmdir()
            elif created.stat().st_size == 0:
                created.unlink()


atexit.register(remove_created_mountpoints)


class Container:
    """One container: start it, poll it, stop its whole process tree."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        stdout: Path,
        stderr: Path | None = None,
        mounts: Sequence[Mount] = (),
        cwd: str = "/",
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.mounts = list(mounts)
        self.cwd = cwd
        self.stdout_path = stdout
        self.stderr_path = stderr  # None: merged into stdout, as a pod's log
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        for mount in self.mounts:
            _make_mountpoint(mount.target, file=mount.source.is_file())
        spec = {
            "argv": self.argv,
            "env": self.env,
            "cwd": self.cwd,
            "mounts": [
                {"source": str(m.source), "target": m.target, "read_only": m.read_only} for m in self.mounts
            ],
        }
        namespace = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            namespace[1:1] = ["--user", "--map-root-user"]
        launcher = [*namespace, "--", sys.executable, "-I", "-S", "-c", _LAUNCH, json.dumps(spec)]
        self.stdout_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.stdout_path, "ab") as out:
            err = open(self.stderr_path, "ab") if self.stderr_path is not None else None  # noqa: SIM115
            try:
                self.process = subprocess.Popen(
                    launcher,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err if err is not None else subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                if err is not None:
                    err.close()
        self.started_at = time.time()

    def poll(self) -> int | None:
        """The exit code once the command ended (128 + N when killed by signal N), else None."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            return None
        if self.finished_at is None:
            self.finished_at = time.time()
        return 128 - code if code < 0 else code

    def signal_tree(self, signo: int) -> None:
        """Send ``signo`` to every process of the container (its session and process group)."""
        if self.process is None:
            return
        for pid in _session_members(self.process.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signo)

    def stop(self, grace: float = 3.0, *, term: bool = True) -> int | None:
        """SIGTERM the tree, SIGKILL what is left after ``grace`` seconds; returns the exit code. ``term=False``:
        SIGKILL at once, as when the container's first process ends on the SIGTERM sent to it alone.

        What is left is every process the container started, as when a container's PID namespace ends: also
        those that left its session (``setsid``) while still below one of its processes when the stop began."""
        if self.process is None:
            return None
        started = self._members()  # before anything dies: an escaped process's parent is still known now
        if self.poll() is None and term:
            self.signal_tree(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self._kill_all(started)
        self._kill_all(started)  # stragglers the command left in the background
        self.process.wait()
        return self.poll()

    def _members(self) -> dict[int, int]:
        """The container's live processes now (its session and group, and their descendants): pid → start time."""
        assert self.process is not None
        leader = self.process.pid
        table = _process_table()
        # a session or group id stays busy while a member lives, so these are the container's own
        found = {pid for pid, row in table.items() if leader in (row[1], row[2])}
        if self.process.returncode is None:  # not reaped yet: its pid is still its own
            found.add(leader)
        children: dict[int, list[int]] = {}
        for pid, row in table.items():
            children.setdefault(row[0], []).append(pid)
        stack = list(found)
        while stack:
            for kid in children.get(stack.pop(), ()):
                if kid not in found:
                    found.add(kid)
                    stack.append(kid)
        return {pid: table[pid][3] for pid in found if pid in table}

    def _kill_all(self, started: dict[int, int]) -> None:
        """SIGKILL the container's processes: those of ``started`` still alive and whatever is below them now.
        All of them are stopped first, so that none sees another die before its own end (as when a PID
        namespace ends): a keeper never records its trial "killed by signal 9" on its way down."""
        for _ in range(3):  # a process may fork between a look and its kill: look again
            table = _process_table()
            alive = {pid for pid, ticks in started.items() if pid in table and table[pid][3] == ticks}
            current = self._members() if self.process is not None else {}
            victims = (alive | set(current)) - {os.getpid()}
            if not victims:
                return
            for signo in (signal.SIGSTOP, signal.SIGKILL):
                for pid in victims:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signo)
            started = {**started, **current}


def _process_table() -> dict[int, tuple[int, int, int, int]]:
    """Live processes of this machine: pid → (parent, process group, session, start time)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_text(errors="replace")
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        if fields[0] in ("Z", "X"):
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    return table


def _session_members(leader: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_text(errors="replace")
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        if leader in (int(fields[2]), int(fields[3])):  # process group or session
            members.append(int(name))
    return members


__all__ = ["BASE_ENV_KEYS", "Container", "Mount", "container_env", "remove_created_mountpoints"]
