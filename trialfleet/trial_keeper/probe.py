#!/usr/bin/env python3
"""trialfleet worker probe: the manager's hands on an SSH host, one batched request per round trip.

Usage: ``python3 probe.py <prepare|launch|poll|kill|write>`` with a JSON request on stdin; prints one JSON answer.

Standalone like ``keeper.py`` (stdlib only, Linux, Python >= 3.8) and uploaded next to it, whose helpers it
imports. It never parses metrics: ``poll`` returns the raw bytes of ``.nni/metrics`` and ``trial.stdout`` after
the manager's cursors (base64, capped so that a chatty trial cannot starve the others) and the manager parses
them with the same code as every other platform.

* ``prepare``: unpack the uploaded code archive into ``<root>/code``; report free disk space, the boot id,
  whether this python has a real ``nni``, the environment trials inherit, and the trials already launched.
* ``launch``: copy ``<root>/code`` into the trial directory, write the files the manager prepared, start the
  keeper detached. Idempotent: a trial directory that was launched before answers with that launch.
* ``poll``: for every trial, keeper liveness (pid + start ticks + boot id), keeper.json, result.json, new bytes.
* ``kill``: SIGTERM the keeper (it ends the tree); if the keeper is gone, end the tree in a detached process.
* ``write``: write the files the manager prepared into a trial directory (a Slurm job starts the keeper later),
  removing the records a previous submission of the same attempt may have left.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

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
    return shutil.disk_usage(path).free


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
        "real_nni": has_real_nni(request["real_nni_probe"], request.get("shim_dir", "")),
        "env": dict(os.environ),
        "launched": launched,
    }


def sorted_names(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def unpack(archive: str, dest: str) -> None:
    """Replace ``dest`` with the archive's content; trials run in copies, so none uses ``dest`` itself."""
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


def has_real_nni(probe: str, shim_dir: str) -> bool:
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != shim_dir]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.stdout.strip() == b"yes"


# ---- launch ----------------------------------------------------------------------------------------------


def launch(request: dict) -> dict:
    trial_dir = request["trial_dir"]
    os.makedirs(trial_dir, exist_ok=True)
    record_path = os.path.join(trial_dir, LAUNCH_RECORD)
    try:
        os.close(os.open(os.path.join(trial_dir, LAUNCH_LOCK), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return dict(wait_for_launch(record_path), existing=True)
    code = os.path.join(trial_dir, "code")
    shutil.rmtree(code, ignore_errors=True)
    shutil.copytree(request["code_dir"], code, symlinks=True)
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    for name, content in request["files"].items():
        write_private(os.path.join(trial_dir, name), content)
    record = start_keeper(request["keeper"], trial_dir)
    record.update(request.get("record") or {})
    keeper.write_json_atomically(record_path, record)
    return dict(record, existing=False)


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


def start_keeper(keeper_path: str, trial_dir: str) -> dict:
    # blocked before the fork, so the keeper starts with them blocked and a cancel sent early is not lost
    signal.pthread_sigmask(signal.SIG_BLOCK, keeper.WATCHED)
    log = os.open(os.path.join(trial_dir, "keeper.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", keeper_path, trial_dir],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    finally:
        os.close(log)
    return {
        "keeper_pid": process.pid,
        "keeper_start_ticks": keeper.start_ticks(process.pid),
        "boot_id": keeper.boot_id(),
        "launched_at": time.time(),
    }


# ---- poll ------------------------------------------------------------------------------------------------


def poll(request: dict) -> dict:
    trials = request["trials"]
    share = max(MIN_SHARE, int(request.get("budget", 8 << 20)) // max(1, 2 * len(trials)))
    return {"boot_id": keeper.boot_id(), "trials": {t["name"]: poll_one(t, share) for t in trials}}


def poll_one(trial: dict, share: int) -> dict:
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


COMMANDS = {"prepare": prepare, "launch": launch, "poll": poll, "kill": kill, "write": write}


def main(argv: list) -> int:
    if len(argv) != 2 or argv[1] not in COMMANDS:
        sys.stderr.write("usage: probe.py <{}> < request.json\n".format("|".join(COMMANDS)))
        return 2
    answer(COMMANDS[argv[1]](json.load(sys.stdin)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
