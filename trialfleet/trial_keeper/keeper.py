#!/usr/bin/env python3
"""trialfleet trial keeper: runs one trial command in its trial directory and records how it ended.

Usage: ``python3 -I -S keeper.py <trial_dir>`` or ``python3 keeper.py --version``.

Standalone on purpose (stdlib only, Linux, Python >= 3.8): it is copied to SSH hosts and cluster nodes where
nothing of trialfleet is installed. The protocol is described in docs/trial-directory.md:

* reads ``command.json``: ``{"argv", "cwd", "env" (complete), "max_duration", "kill_grace", "protocol": 1}``
* the command writes ``trial.stdout`` / ``trial.stderr`` itself (opened O_APPEND; nothing flows through here)
* writes ``keeper.json`` once the command runs and ``result.json`` once it ended (temp file + fsync + rename)

SIGTERM, SIGINT or SIGHUP cancel the trial; past ``max_duration`` it times out. In both cases, and also after a
normal exit (stragglers left in the background), the whole process tree gets SIGTERM, then SIGKILL after
``kill_grace`` seconds. The tree is the command's process group and session plus every descendant of the
keeper, which makes itself a child subreaper so that processes that detach (setsid, double fork) are
re-parented to it instead of escaping to init. The keeper never writes to its own stdio: its parent may be gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

PROTOCOL = 1
VERSION = "trialfleet-keeper 1.0 protocol 1"
CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WATCHED = (signal.SIGCHLD, *CANCEL_SIGNALS)
PR_SET_CHILD_SUBREAPER = 36
SIGKILL_WAIT = 10.0  # after SIGKILL, how long to wait for processes stuck in the kernel (D state)


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


def boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass  # without it the group/session scan still finds most of the tree


def process_alive(pid: int | None, ticks: int | None, boot: str | None = None) -> bool:
    """Is the process that started at ``ticks`` (on the boot ``boot``) still there: not a zombie, not a reused pid?"""
    if not pid or (boot is not None and boot != boot_id()):
        return False
    fields = proc_fields(pid)
    return fields is not None and fields[0] != "Z" and (ticks is None or int(fields[19]) == ticks)


def trial_tree(leader: int, also_below: tuple = (), leader_ticks: int | None = None) -> set:
    """Live (non-zombie) processes of a trial: the process group and session ``leader`` leads, and every
    descendant of them and of ``also_below`` (the keeper, whose re-parented orphans are the trial's too).

    ``leader_ticks``: the leader's start time; when the pid now belongs to another process, its old group and
    session are gone (Linux keeps those ids busy while any member lives) and only ``also_below`` is searched.
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
    found = set() if reused else {pid for pid, row in table.items() if leader in (row[2], row[3])}
    stack = [*also_below, *found]
    while stack:
        for kid in children.get(stack.pop(), ()):
            if kid not in found:
                found.add(kid)
                stack.append(kid)
    found.discard(os.getpid())
    return {pid for pid in found if table[pid][0] != "Z"}


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


class Trial:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None  # raw wait status of the command, once reaped

    def reap(self) -> None:
        """Reap every exited child (re-parented orphans too); remember the command's own status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
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
        me = os.getpid()
        end_tree(lambda: trial_tree(self.pid, also_below=(me,)), grace, pause=self._pause)
        self.reap()

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


def keeper_record(pid: int) -> dict:
    me = os.getpid()
    return {
        "protocol": PROTOCOL,
        "keeper_pid": me,
        "keeper_start_ticks": start_ticks(me),
        "pid": pid,
        "pgid": pid,  # the command runs in a new session, so it leads its own group
        "start_ticks": start_ticks(pid),
        "boot_id": boot_id(),
        "hostname": os.uname().nodename,
        "start_time": time.time(),
    }


def open_output(trial_dir: str, name: str) -> int:
    return os.open(os.path.join(trial_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def start(command: dict, trial_dir: str) -> subprocess.Popen:
    out, err = open_output(trial_dir, "trial.stdout"), open_output(trial_dir, "trial.stderr")
    with contextlib.suppress(OSError):  # NNI's name for the trial's output, which its users' scripts read
        os.symlink("trial.stdout", os.path.join(trial_dir, "trial.log"))
    try:
        return subprocess.Popen(
            command["argv"],
            cwd=command["cwd"],
            env=command["env"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            # the keeper blocks the signals it waits for; the command must not inherit that mask
            preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, []),
        )
    finally:
        os.close(out)
        os.close(err)


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
    path = os.path.join(trial_dir, "result.json")
    write_json_atomically(path, result_record(f"keeper error: {exc}", error=repr(exc)))


def supervised(trial_dir: str, command: dict, forwarder) -> None:  # forwarder: Forwarder | None
    result_path = os.path.join(trial_dir, "result.json")
    if set(CANCEL_SIGNALS) & signal.sigpending():
        write_json_atomically(result_path, result_record("canceled", canceled=True))
        return
    become_subreaper()
    # written before the command exists: whoever finds this attempt already launched adopts this keeper
    me = os.getpid()
    launch = {
        "protocol": PROTOCOL,
        "keeper_pid": me,
        "keeper_start_ticks": start_ticks(me),
        "boot_id": boot_id(),
    }
    # launch.json and keeper.json describe live processes, which a host crash ends anyway (the boot id tells
    # a restarted manager so): their fsyncs bought nothing and cost ~10 ms before every trial could start
    write_json_atomically(os.path.join(trial_dir, "launch.json"), launch, durable=False)
    try:
        process = start(command, trial_dir)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        with open(os.path.join(trial_dir, "trial.stderr"), "a") as f:
            f.write(f"trialfleet: could not start the trial command: {exc}\n")
        write_json_atomically(result_path, result_record(f"could not start: {exc}", error=str(exc)))
        return
    write_json_atomically(os.path.join(trial_dir, "keeper.json"), keeper_record(process.pid), durable=False)
    if forwarder is not None:
        forwarder.send_record("keeper.json")
    trial = Trial(process.pid)
    cause = trial.supervise(command.get("max_duration"))
    trial.end_tree(float(command.get("kill_grace", 5)))
    process.returncode = trial.status  # reaped here; keeps Popen from waiting on a reused pid
    write_json_atomically(result_path, describe_end(trial.status, cause, command.get("max_duration")))


def main(argv: list[str]) -> int:
    if argv[1:] == ["--version"]:
        print(VERSION)
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: keeper.py <trial_dir> | --version\n")
        return 2
    # block before anything else, so that a cancel arriving during start-up is not lost
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(argv[1])
    except KeeperFailed:
        return 1
    except Exception as exc:  # whatever went wrong must end up in result.json
        record_error(argv[1], exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
