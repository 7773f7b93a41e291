#!/usr/bin/env python3
"""trialfleet worker probe: the manager's hands on an SSH host, one batched request per round trip.

Usage: ``python3 probe.py <prepare|launch|launch_all|poll|kill|write|mount|read>`` with a JSON request on stdin;
prints one JSON answer. The manager runs it as an imported module (``support.RUN_AS_MODULE``), which caches its compiled form.

Standalone like ``keeper.py`` (stdlib only, Linux, Python >= 3.8) and uploaded next to it, whose helpers it
imports. It never parses metrics: ``poll`` returns the raw bytes of ``.nni/metrics`` and ``trial.stdout`` after
the manager's cursors (base64, capped so that a chatty trial cannot starve the others) and the manager parses
them with the same code as every other platform.

* ``prepare``: unpack the uploaded code archive into ``<root>/code``; report free disk space, the boot id,
  whether this python has a real ``nni``, the environment trials inherit, the trials already launched, and the
  keeper's protocol version.
* ``launch``: copy ``<root>/code`` into the trial directory, write the files the manager prepared, start the
  keeper detached. Idempotent: a trial directory that was launched before answers with that launch. With a
  ``lease`` (the GPUs the manager chose), those are leased on this host first (``leases.py``), or the launch is
  refused with why and the GPUs other experiments hold (``{"refused", "leased"}``).
* ``launch_all``: ``launch`` for each of several trials at once, each answered with its record or its error (not
  through ``serve``: with reuse, launches go one by one over the runner).
* ``poll``: for every trial, keeper liveness (pid + start ticks + boot id), keeper.json, result.json, new bytes.
* ``kill``: SIGTERM the keeper (it ends the tree); if the keeper is gone, end the tree in a detached process.
* ``write``: write the files the manager prepared into a trial directory (a Slurm job starts the keeper later),
  removing the records a previous submission of the same attempt may have left.
* ``read``: small regular files of a trial directory, base64 (reuse mode copies an ended trial's logs so).
* ``leases``: every experiment's live GPU leases and waits on this host (docs/shared-fleet.md).
* ``serve``: the commands above as JSON lines over one long-lived process that also reports trials' ends as they
  happen (see :func:`serve`); ``watch`` there names more trials to report.
* ``mount``: mount a shared storage at a mount point unless something is mounted there already, with the
  command the manager built (``sudo -n`` first unless root); secrets come in the request, never on a command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
import time

# base64, shutil, subprocess and tarfile are imported by the commands that use them. Without reuse every launch
# is an interpreter of its own (``probe.py launch``), and on the test fleet's Python 3.11 these imports took
# 16 ms of its 40 ms of CPU: more than the keeper's whole start-up beyond a bare interpreter (13 ms).

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out

import keeper

MIN_SHARE = 1_100_000  # every stream may move past one metric record of NNI's maximum size per poll
LAUNCH_WAIT = 60.0  # a concurrent launch of the same directory may still be copying a large code directory
LAUNCH_LOCK = "launch.lock"  # created first: this host was asked to launch the directory
LAUNCH_RECORD = (
    "remote-launch.json"  # the launch as the manager's handle needs it (launch.json is the keeper's)
)


def answer(data: dict) -> None:
    sys.stdout.write(json.dumps(data))
    sys.stdout.flush()


def read_json(path: str) -> dict | None:
    return keeper.read_record(path)


def disk_free(path: str) -> int:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    found = os.statvfs(path)
    return found.f_bavail * found.f_frsize


# ---- prepare ---------------------------------------------------------------------------------------------


def prepare(request: dict) -> dict:
    root = request["root"]
    if request.get("code_archive"):
        unpack(request["code_archive"], os.path.join(root, "code"))
    trials = os.path.join(root, "trials")
    launched = [
        name for name in sorted_names(trials) if os.path.exists(os.path.join(trials, name, LAUNCH_LOCK))
    ]
    return {
        "free_bytes": disk_free(root),
        "boot_id": keeper.boot_id(),
        "env": dict(os.environ),
        "launched": launched,
        "keeper_version": keeper.VERSION,
    }


def sorted_names(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def unpack(archive: str, dest: str) -> None:
    """Replace ``dest`` with the archive's content; trials run in copies, so none uses ``dest`` itself."""
    import shutil
    import tarfile

    fresh, old = dest + ".new", dest + ".old"
    for stale in (fresh, old):
        shutil.rmtree(stale, ignore_errors=True)
    os.makedirs(fresh)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(fresh, filter="data")
        else:
            tar.extractall(fresh)  # our own archive, written by the manager
    if os.path.exists(dest):
        os.rename(dest, old)
    os.rename(fresh, dest)
    shutil.rmtree(old, ignore_errors=True)


# ---- launch ----------------------------------------------------------------------------------------------


def launch(request: dict) -> dict:
    trial_dir = request["trial_dir"]
    os.makedirs(trial_dir, exist_ok=True)
    record_path = os.path.join(trial_dir, LAUNCH_RECORD)
    try:
        os.close(os.open(os.path.join(trial_dir, LAUNCH_LOCK), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return dict(wait_for_launch(record_path), existing=True)
    files, held = request["files"], []
    if request.get("lease"):  # (imported here: only GPU trials pay for it)
        import leases

        taken = take_lease(request["lease"])
        if isinstance(taken, str):
            os.unlink(os.path.join(trial_dir, LAUNCH_LOCK))  # not launched: a later offer launches it
            experiment = request["lease"]["experiment"]
            return {"refused": taken, "leased": leases.others_leases(leases.directory(), experiment)}
        held, paths = taken
        command = json.loads(files["command.json"])
        files = dict(files, **{"command.json": json.dumps(dict(command, leases=paths))})
    try:
        return launch_leased(request, trial_dir, files, tuple(held))
    finally:
        for fd in held:  # the keeper holds them from its birth
            os.close(fd)


def take_lease(lease: dict):  # -> tuple[list, list] | str
    import leases

    record = {key: lease[key] for key in ("experiment", "trial", "attempt")}
    record.update(pid=os.getpid(), host=os.uname().nodename)
    per_gpu, usable = int(lease["max_per_gpu"]), lease.get("usable")
    return leases.take_chosen(leases.directory(), record, lease["gpus"], per_gpu, usable)


def launch_leased(request: dict, trial_dir: str, files: dict, held: tuple) -> dict:
    record_path = os.path.join(trial_dir, LAUNCH_RECORD)
    code = os.path.join(trial_dir, "code")
    if os.path.lexists(code):  # an earlier copy into this directory (its lock was removed since)
        import shutil

        shutil.rmtree(code, ignore_errors=True)
    copy_tree(request["code_dir"], code)
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    for name, content in files.items():
        write_private(os.path.join(trial_dir, name), content)
    record = start_keeper(trial_dir, held)
    record.update(request.get("record") or {})
    # not fsynced: a host crash ends the keeper it describes; a reader must only never see half of it
    keeper.write_json_atomically(record_path, record, durable=False)
    return dict(record, existing=False)


def launch_all(request: dict) -> dict:
    """``launch`` for each of ``request["launches"]``, in order, in this one interpreter: the launches the manager
    asked of this host at once (the first trials of an experiment, trials that ended together) pay one SSH session
    and one interpreter's start between them instead of one each. Each keeper is still a process of its own, as
    with ``launch``; a launch that fails is answered with its error and does not keep the others from starting."""
    answers: list = []
    for one in request["launches"]:
        try:
            answers.append({"answer": launch(one)})
        except Exception as exc:
            answers.append({"error": f"{type(exc).__name__}: {exc}"})
    return {"launched": answers}


def copy_tree(source: str, dest: str) -> None:
    """Copy the directory ``source`` to a new ``dest`` as ``shutil.copytree(source, dest, symlinks=True)``
    does: symbolic links copied as links, regular files with their data, permission bits and times, directories
    with their permission bits and times (set once their content is in). Other kinds of file are not copied.
    shutil's import (bz2, lzma and threading with it) would cost every launch 8 ms of CPU."""
    os.mkdir(dest)
    with os.scandir(source) as entries:
        for entry in entries:
            target = os.path.join(dest, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir():
                copy_tree(entry.path, target)
            elif entry.is_file():
                copy_file(entry.path, target, entry.stat())
    copy_times_and_mode(dest, os.stat(source))


def copy_file(source: str, dest: str, info: os.stat_result) -> None:
    with open(source, "rb") as src, open(dest, "xb") as dst:
        offset, size = 0, info.st_size
        while offset < size:  # in the kernel; a file that grows meanwhile is copied as far as it was
            sent = os.sendfile(dst.fileno(), src.fileno(), offset, size - offset)
            if sent == 0:
                break
            offset += sent
    copy_times_and_mode(dest, info)


def copy_times_and_mode(dest: str, info: os.stat_result) -> None:
    os.chmod(dest, stat.S_IMODE(info.st_mode))
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


def write_private(path: str, content: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(content)


def wait_for_launch(record_path: str) -> dict:
    deadline = time.monotonic() + LAUNCH_WAIT
    while time.monotonic() < deadline:
        record = read_json(record_path)
        if record is not None:
            return record
        time.sleep(0.05)
    raise RuntimeError("another launch of this trial directory did not finish")


def start_keeper(trial_dir: str, keep: tuple = ()) -> dict:
    pid = keeper.fork_keeper(
        trial_dir, keep
    )  # this interpreter, forked: the keeper needs no start-up of its own
    return {
        "keeper_pid": pid,
        "keeper_start_ticks": keeper.start_ticks(pid),
        "boot_id": keeper.boot_id(),
        "launched_at": time.time(),
    }


# ---- poll ------------------------------------------------------------------------------------------------


def poll(request: dict) -> dict:
    trials = request["trials"]
    share = max(MIN_SHARE, int(request.get("budget", 8 << 20)) // max(1, 2 * len(trials)))
    return {"boot_id": keeper.boot_id(), "trials": {t["name"]: poll_one(t, share) for t in trials}}


def poll_one(trial: dict, share: int) -> dict:
    import base64

    trial_dir = trial["dir"]
    # liveness first: the keeper writes result.json and then exits
    running = keeper.process_alive(
        trial.get("keeper_pid"), trial.get("keeper_start_ticks"), trial.get("boot_id") or ""
    )
    out: dict = {
        "exists": os.path.isdir(trial_dir),
        "alive": running,
        "keeper": read_json(os.path.join(trial_dir, "keeper.json")),
        "result": read_json(os.path.join(trial_dir, "result.json")),
    }
    for channel, name in (("metrics", os.path.join(".nni", "metrics")), ("stdout", "trial.stdout")):
        data, more = read_from(os.path.join(trial_dir, name), int(trial.get(channel, 0)), share)
        out[channel] = base64.b64encode(data).decode("ascii")
        out[channel + "_more"] = more
    return out


def read_from(path: str, offset: int, limit: int) -> tuple:
    try:
        f = keeper.open_regular(path)  # a FIFO the trial made there is never waited on
    except OSError:
        return b"", False
    with f:
        size = os.fstat(f.fileno()).st_size
        data = os.pread(f.fileno(), min(limit, max(0, size - offset)), offset)
    return data, offset + len(data) < size


# ---- write -----------------------------------------------------------------------------------------------


def write(request: dict) -> dict:
    trial_dir = request["trial_dir"]
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    for name in request.get("remove", []):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(trial_dir, name))
    for name, content in request["files"].items():
        write_private(os.path.join(trial_dir, name), content)
    return {"written": sorted(request["files"])}


# ---- read ------------------------------------------------------------------------------------------------

READ_LIMIT = 4 << 20  # larger files are left to SFTP, which streams them


def read(request: dict) -> dict:
    """Small regular files of a trial directory in one answer (an ended trial's logs, for the manager's copy)."""
    import base64

    files, larger = {}, []
    for name in request["names"]:
        try:
            f = keeper.open_regular(os.path.join(request["trial_dir"], name))
        except OSError:
            continue
        with f:
            if os.fstat(f.fileno()).st_size > READ_LIMIT:
                larger.append(name)
                continue
            files[name] = base64.b64encode(f.read(READ_LIMIT + 1)).decode("ascii")
    return {"files": files, "larger": larger}


# ---- kill ------------------------------------------------------------------------------------------------


def kill(request: dict) -> dict:
    trial_dir = request["trial_dir"]
    if keeper.process_alive(
        request.get("keeper_pid"), request.get("keeper_start_ticks"), request.get("boot_id") or ""
    ):
        keeper.send({request["keeper_pid"]}, signal.SIGTERM, signal.SIGCONT)  # even a stopped keeper acts
        return {"action": "signalled the keeper"}
    if read_json(os.path.join(trial_dir, "result.json")) is not None:
        return {"action": "already ended"}
    canceled, grace = bool(request.get("canceled")), float(request.get("grace", 5))
    detach(lambda: keeper.end_without_keeper(trial_dir, canceled, grace))
    return {"action": "ending the tree without its keeper"}


def detach(work) -> None:
    """Run ``work`` in a grandchild in its own session, not holding this command's output open."""
    if os.fork():
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        work()
    finally:
        os._exit(0)


# ---- mount -----------------------------------------------------------------------------------------------

MOUNT_POINT = "<mount point>"  # in the request's argv: replaced by the absolute mount point


def mount(request: dict) -> dict:
    point = os.path.abspath(os.path.expanduser(request["mount_point"]))
    out = {"mount_point": point, "status": "already mounted", "exit": 0, "output": ""}
    try:
        for directory in [point, *request.get("dirs", [])]:
            os.makedirs(os.path.expanduser(directory), exist_ok=True)
    except OSError as exc:
        return dict(out, status="failed", exit=-1, output=f"cannot create {exc.filename}: {exc}")
    if point not in mount_points():
        out.update(run_mount(request, point))
    expect = request.get("expect")
    out["visible"] = out["status"] == "failed" or not expect or os.path.isdir(os.path.join(point, expect))
    return out


def run_mount(request: dict, point: str) -> dict:
    import subprocess

    secrets = request.get("env") or {}  # for the command's environment only; "hide" names the secret ones
    argv = [point if arg == MOUNT_POINT else arg for arg in request["argv"]]
    if os.geteuid() != 0:
        keep = ["--preserve-env=" + ",".join(sorted(secrets))] if secrets else []
        argv = ["sudo", "-n", *keep, *argv]
    try:
        done = subprocess.run(
            argv,
            env=dict(os.environ, **secrets),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=float(request.get("timeout", 120)),
        )
        code, text = done.returncode, done.stdout.decode("utf-8", "replace")
    except OSError as exc:
        code, text = 127, f"{argv[0]}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        code, text = -1, "no answer within {} s".format(request.get("timeout", 120))
    for name in request.get("hide", []):
        text = text.replace(secrets[name], "******") if secrets.get(name) else text
    status = "mounted" if code == 0 else "failed"
    return {"status": status, "exit": code, "output": text.strip()[-4000:], "argv": argv}


def mount_points() -> set:
    """What is mounted where, as this process sees it (a bind mount too, which os.path.ismount misses)."""
    points = set()
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split(" ")
                if len(fields) > 4:
                    points.add(unescape_mount_path(fields[4]))
    except OSError:
        pass
    return points


def unescape_mount_path(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 …)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def leases_here(request: dict) -> dict:
    """This host's live GPU leases and waits, every experiment's (``leases.py``)."""
    import leases

    path = leases.directory()
    return {"leases": leases.live_leases(path), "waits": leases.live_waits(path)}


COMMANDS = {
    "prepare": prepare,
    "launch": launch,
    "launch_all": launch_all,
    "poll": poll,
    "kill": kill,
    "write": write,
    "mount": mount,
    "read": read,
    "leases": leases_here,
}


# ---- serve -----------------------------------------------------------------------------------------------

WATCH_INTERVAL = 0.01  # how often a serving probe looks for the end records of the trials it watches


def serve() -> int:
    """The host's runner: one JSON request per line on stdin, one JSON answer per line on stdout, for as long as
    the manager's SSH channel lives; meanwhile an ``ended`` event as soon as a watched trial's keeper wrote its end
    record. Trials stay under their keepers (own sessions): this process ending, by EOF or a kill, ends none."""
    os.chdir(os.path.expanduser("~"))
    emit({"event": "ready", "pid": os.getpid()})
    watched: set = set()
    requests = keeper.LineReader(sys.stdin.fileno())
    while True:
        lines = requests.lines(WATCH_INTERVAL)
        if lines is None:
            return 0
        for line in lines:
            emit(serve_one(json.loads(line), watched))
        for trial_dir in sorted(watched):
            if os.path.exists(os.path.join(trial_dir, "result.json")):
                watched.discard(trial_dir)
                emit({"event": "ended", "trial_dir": trial_dir})
        keeper.reap_exited_children()  # keepers started here, and the intermediate children of ``detach``


def serve_one(message: dict, watched: set) -> dict:
    command, request = message["command"], message["request"]
    if command == "watch":  # trials launched by another process (a session of their own)
        watched.update(request["trial_dirs"])
        return {"id": message["id"], "answer": {}}
    try:
        result = COMMANDS[command](request)
    except Exception as exc:
        return {"id": message["id"], "error": f"{type(exc).__name__}: {exc}"}
    if command == "launch":
        watched.add(request["trial_dir"])
    elif command == "poll":  # adopted trials are watched from their first poll on
        for trial in request["trials"]:
            if (
                result["trials"][trial["name"]]["result"] is None
                and result["trials"][trial["name"]]["exists"]
            ):
                watched.add(trial["dir"])
    return {"id": message["id"], "answer": result}


def emit(data: dict) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def main(argv: list) -> int:
    if argv[1:] == ["serve"]:
        return serve()
    if len(argv) != 2 or argv[1] not in COMMANDS:
        sys.stderr.write("usage: probe.py <{}|serve> < request.json\n".format("|".join(COMMANDS)))
        return 2
    answer(COMMANDS[argv[1]](json.load(sys.stdin)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
