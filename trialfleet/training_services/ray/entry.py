#!/usr/bin/env python3
"""trialfleet's entrypoint of a Ray job: runs one trial attempt under the trial keeper, and streams its trial
directory into the job's log, the one channel from a Ray node back to the manager.

Usage (Ray runs it in the job's working directory, the uploaded code): ``python3 -I -S entry.py <payload>``.
The payload is this trial's (JSON); what every trial shares is in ``settings.json`` beside this script.

Standalone on purpose (stdlib only, Linux, Python >= 3.8), like the keeper beside which it is shipped. It

* makes the trial directory on this node (``<root>/<experiment>/trials/<attempt>``), writes its inputs and a
  ``command.json`` (keeper protocol 2) holding what the trial's environment changes in the job's: NNI's
  variables, the trial's own, the ``nni`` shim; the keeper inherits the job's environment and applies that;
* starts the keeper in a session of its own, so that Ray's process-group kill of a dead job cannot take it down
  before it has ended the trial's tree: the keeper gets SIGTERM when this process dies (``PR_SET_PDEATHSIG``);
* writes, as lines ``@trialfleet/1 <json>`` on its stdout (the job's log), every byte the trial adds to its
  streams (``.nni/metrics``, ``trial.stdout``, ``trial.stderr``) with the offset it starts at, and the records
  (``node.json``, ``keeper.json``) whole. Once the keeper has exited: what the streams still hold, the other
  files the trial left in its directory (up to a budget), and ``result.json`` last of all.

The manager mirrors those lines into its own copy of the trial directory (``log_channel.py``); offsets make
every replay of the log idempotent. Each line is ASCII JSON: undecodable bytes travel as surrogate escapes.
SIGTERM (Ray's stop) is passed on to the keeper, which ends the trial's whole tree and records it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

MARK = "@trialfleet/1 "
STREAMS = (".nni/metrics", "trial.stdout", "trial.stderr")
SETTINGS_FILE = "settings.json"
NODE_RECORD = "node.json"  # where this attempt runs: host, trial directory, working directory, pid
LEFT_RECORD = "outputs-left.json"  # files over the budget, which stay on the node
CHUNK = 16 * 1024  # bytes of a file per log line (a line is at most ~6x that once escaped)
PAUSE = 0.2
OUTPUT_FILE_LIMIT = 2 * 1024 * 1024
OUTPUT_BUDGET = 16 * 1024 * 1024
#: what the manager wrote or the keeper keeps for itself: never shipped back as an output
NOT_OUTPUTS = ("parameter.cfg", "command.json", "launch.json", "keeper.json", "result.json", NODE_RECORD)
PR_SET_PDEATHSIG = 1


def frame(name: str, data: bytes, at: int | None = None) -> str:
    """One log line: ``data`` is the whole file ``name`` (``at`` None) or its bytes from offset ``at``."""
    record: dict = {"file": name, "text": data.decode("utf-8", "surrogateescape")}
    if at is None:
        record["whole"] = True
    else:
        record["at"] = at
    return MARK + json.dumps(record, separators=(",", ":")) + "\n"


def unframe(line: str) -> tuple[str, bytes, int | None] | None:
    """A log line back to ``(file, data, offset)``, None for a line that is not one of ours."""
    if not line.startswith(MARK):
        return None
    record = json.loads(line[len(MARK) :])
    data = record["text"].encode("utf-8", "surrogateescape")
    return str(record["file"]), data, None if record.get("whole") else int(record["at"])


def emit(line: str) -> None:
    data = line.encode("ascii")
    while data:
        data = data[os.write(1, data) :]


def open_regular(path: str):  # -> BinaryIO | None
    """A regular file opened for reading, or None: missing, or a FIFO or device the trial put there (opened
    without waiting, O_NONBLOCK, and left alone: reading it would hold this process for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_from(path: str, offset: int, size: int = CHUNK) -> bytes:
    f = open_regular(path)
    if f is None:
        return b""
    with f:
        f.seek(offset)
        return f.read(size)


class Streamer:
    """Sends what is new in the trial directory's streams, and each record once."""

    def __init__(self, trial_dir: str) -> None:
        self.trial_dir = trial_dir
        self.offsets = {name: 0 for name in STREAMS}
        self.sent: set = set()

    def pump(self) -> None:
        for name in STREAMS:
            while True:
                data = read_from(os.path.join(self.trial_dir, name), self.offsets[name])
                if not data:
                    break
                emit(frame(name, data, self.offsets[name]))
                self.offsets[name] += len(data)

    def record(self, name: str) -> bool:
        if name in self.sent:
            return True
        f = open_regular(os.path.join(self.trial_dir, name))
        if f is None:
            return False
        with f:
            data = f.read()
        emit(frame(name, data))
        self.sent.add(name)
        return True

    def outputs(self) -> None:
        """The files the trial left in its directory, each up to a limit and all within a budget."""
        budget, left = OUTPUT_BUDGET, []
        for name, size in output_files(self.trial_dir):
            if size > OUTPUT_FILE_LIMIT or size > budget:
                left.append({"file": name, "size": size})
                continue
            budget -= size
            path, offset = os.path.join(self.trial_dir, name), 0
            data = read_from(path, 0)
            emit(frame(name, b"", 0))  # an empty file is still a file
            while data:
                emit(frame(name, data, offset))
                offset += len(data)
                data = read_from(path, offset)
        if left:
            info = {"files": left, "host": socket.gethostname(), "trial_dir": self.trial_dir}
            emit(frame(LEFT_RECORD, json.dumps(info).encode()))


def output_files(trial_dir: str) -> list:
    found = []
    private = _identity(os.path.join(trial_dir, "command.json"))
    for top, dirs, names in os.walk(trial_dir):
        rel_top = os.path.relpath(top, trial_dir)
        if rel_top == ".nni":
            dirs[:] = []
            continue
        for name in names:
            rel = name if rel_top == "." else os.path.join(rel_top, name)
            if rel in STREAMS or rel in NOT_OUTPUTS or ".tmp." in name:
                continue
            try:
                info = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            if (info.st_dev, info.st_ino) == private:  # a hard link to the keeper's private input
                continue
            if os.path.isfile(os.path.join(top, name)) and not os.path.islink(os.path.join(top, name)):
                found.append((rel, info.st_size))
    return sorted(found)


def _identity(path: str):  # -> tuple | None
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def trial_environment(payload: dict, trial_dir: str, code_dir: str) -> tuple:
    """What the trial's environment changes in the job's (keeper protocol 2: ``command.json`` holds only this,
    never the job's whole environment): ``(overlay, names to unset)``. The variables that would switch a real
    nni's channel go; NNI's come, with the ``nni`` shim on PYTHONPATH unless the trial's python3 has a real nni."""
    unset = sorted(name for name in payload["unset"] if name in os.environ)
    overlay = dict(payload["env"], NNI_SYS_DIR=trial_dir, NNI_OUTPUT_DIR=trial_dir, NNI_CODE_DIR=code_dir)
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env.update(overlay)
    probe = subprocess.run(
        ["python3", "-c", payload["real_nni_probe"]],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    if probe.stdout.strip() != b"yes":  # no real nni for the trial's python3: the shim is its nni
        shim = os.path.join(code_dir, payload["shim"])
        overlay["PYTHONPATH"] = os.pathsep.join(
            [shim] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
    return overlay, unset


def prepare(payload: dict, code_dir: str) -> str:
    root = payload.get("trial_root") or os.path.join(tempfile.gettempdir(), "trialfleet-ray")
    trial_dir = os.path.join(root, payload["experiment"], "trials", payload["attempt"])
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    for stale in payload["stale"]:  # a directory reused for the same attempt must not show the last run
        if os.path.lexists(os.path.join(trial_dir, stale)):
            os.unlink(os.path.join(trial_dir, stale))
    overlay, unset = trial_environment(payload, trial_dir, code_dir)
    command = dict(payload["command"], cwd=code_dir, env=overlay, env_unset=unset)
    files = dict(payload["files"], **{"command.json": json.dumps(command)})
    for name, content in files.items():
        fd = os.open(os.path.join(trial_dir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
    return trial_dir


def start_keeper(keeper: str, trial_dir: str) -> subprocess.Popen:
    parent = os.getpid()
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        prctl = None

    def die_with_parent() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above: nobody would tell the keeper
            os._exit(1)

    log = os.open(os.path.join(trial_dir, "keeper.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", keeper, trial_dir],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    finally:
        os.close(log)


def exit_code(trial_dir: str) -> int:
    """The job's exit code mirrors the trial's, so ``ray job list`` tells failed trials apart."""
    try:
        with open(os.path.join(trial_dir, "result.json")) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return 1
    if isinstance(result.get("exit_code"), int):
        return min(max(result["exit_code"], 0), 255)
    if isinstance(result.get("signal"), int):
        return 128 + result["signal"]
    return 1


def run(payload: dict) -> int:
    code_dir = os.getcwd()
    trial_dir = prepare(payload, code_dir)
    streamer = Streamer(trial_dir)
    node = {"host": socket.gethostname(), "trial_dir": trial_dir, "code_dir": code_dir, "pid": os.getpid()}
    emit(frame(NODE_RECORD, json.dumps(node).encode()))
    keeper = start_keeper(os.path.join(code_dir, payload["keeper"]), trial_dir)

    def cancel(signo: int, frame: object) -> None:
        if keeper.poll() is None:
            os.kill(keeper.pid, signal.SIGTERM)

    for signo in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signo, cancel)
    while keeper.poll() is None:
        streamer.pump()
        streamer.record("keeper.json")
        time.sleep(PAUSE)
    streamer.pump()
    streamer.record("keeper.json")
    streamer.outputs()
    streamer.record("result.json")  # last: once the manager has it, it has everything else
    return exit_code(trial_dir)


def main(argv: list) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: entry.py <payload JSON>\n")
        return 2
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), SETTINGS_FILE)) as f:
        settings = json.load(f)
    return run(dict(settings, **json.loads(argv[1])))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
