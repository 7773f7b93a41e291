"""TensorBoard for chosen trials (NNI's web UI button, ``nnictl tensorboard``): one ``tensorboard`` process per
task, run by the manager, serving each trial's output directory as a run named ``<Trial No.>-<trial id>``.

A trial's output directory is its ``NNI_OUTPUT_DIR``; where the trial wrote a ``tensorboard`` folder in it (what
NNI's documentation asks: ``os.path.join(os.environ["NNI_OUTPUT_DIR"], "tensorboard")``) that folder is served,
else the whole directory. Trials must be reachable from the manager's machine (the platform's
``trial_dir_here``: local trials, SSH hosts are not, Slurm and DLTS trials on a shared file system are).

TensorBoard is the ``tensorboard`` package, an extra: ``pip install 'trialfleet[tensorboard]'``. A task's
process is its own session, ended with its process group when the task is stopped or the manager ends.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialfleet.errors import TensorboardError
from trialfleet.extras import install_hint

FIRST_PORT = 6006  # TensorBoard's and NNI's
STOP_GRACE = 5.0


@dataclass(frozen=True)
class TrialOutput:
    trial_id: str
    sequence_id: int
    directory: Path  # the trial's output directory on this machine


@dataclass
class TensorboardTask:
    id: str
    trials: list[TrialOutput]
    log_dirs: list[Path]
    port: int
    process: subprocess.Popen[bytes]
    stopped: bool = field(default=False)

    @property
    def status(self) -> str:
        """NNI's task statuses: RUNNING, STOPPED (asked to), ERROR (ended by itself)."""
        if self.process.poll() is None:
            return "RUNNING"
        return "STOPPED" if self.stopped else "ERROR"

    def payload(self) -> dict[str, Any]:
        """NNI's ``TensorboardTaskInfo``."""
        return {
            "id": self.id,
            "status": self.status,
            "trialJobIdList": [t.trial_id for t in self.trials],
            "trialLogDirectoryList": [str(d) for d in self.log_dirs],
            "pid": self.process.pid,
            "port": self.port,
        }


def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def log_dir(output: Path) -> Path:
    """What TensorBoard reads of a trial: its ``tensorboard`` folder when it made one, else its whole output."""
    inner = output / "tensorboard"
    return inner if inner.is_dir() else output


def free_port(host: str, first: int = FIRST_PORT) -> int:
    for port in range(first, first + 200):
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise TensorboardError(f"no free port for TensorBoard on {host} from {first} to {first + 199}")


class TensorboardTasks:
    """The TensorBoard tasks of one manager; its logs go to ``log_directory/tensorboard-<task id>.log``."""

    def __init__(self, log_directory: Path, host: str = "127.0.0.1") -> None:
        self.log_directory = log_directory
        self.host = host
        self._tasks: dict[str, TensorboardTask] = {}
        self._lock = threading.Lock()

    def start(self, trials: Sequence[TrialOutput], port: int | None = None) -> TensorboardTask:
        """A running task serving exactly these trials (an existing one is reused, as NNI does)."""
        if not trials:
            raise TensorboardError("choose at least one trial for TensorBoard")
        if not installed():
            raise TensorboardError(
                f"TensorBoard is not installed where the manager runs: {install_hint('tensorboard')}"
            )
        wanted = sorted(t.trial_id for t in trials)
        with self._lock:
            for task in self._tasks.values():
                same_port = port is None or task.port == port
                if (
                    task.status == "RUNNING"
                    and sorted(t.trial_id for t in task.trials) == wanted
                    and same_port
                ):
                    return task
            if port is not None and free_port(self.host, port) != port:
                raise TensorboardError(
                    f"port {port} on {self.host} is in use: choose another for TensorBoard"
                )
            task_id = f"tb{len(self._tasks) + 1}"
            task = self._launch(task_id, list(trials), port or free_port(self.host))
            self._tasks[task_id] = task
            return task

    def _launch(self, task_id: str, trials: list[TrialOutput], port: int) -> TensorboardTask:
        dirs = [log_dir(t.directory) for t in trials]
        # logdir_spec is "name:path,name:path"; a name holds no ":" or ",", and a path may not hold ","
        for path in dirs:
            if "," in str(path):
                raise TensorboardError(
                    f"TensorBoard cannot read a directory whose path holds a comma: {path}"
                )
        spec = ",".join(f"{t.sequence_id}-{t.trial_id}:{d}" for t, d in zip(trials, dirs, strict=True))
        command = [
            sys.executable, "-m", "tensorboard.main",
            "--logdir_spec", spec, "--host", self.host, "--port", str(port), "--reload_interval", "5",
        ]  # fmt: skip
        self.log_directory.mkdir(parents=True, exist_ok=True)
        with open(self.log_directory / f"tensorboard-{task_id}.log", "ab") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        return TensorboardTask(task_id, trials, dirs, port, process)

    def get(self, task_id: str) -> TensorboardTask | None:
        return self._tasks.get(task_id)

    def all(self) -> list[TensorboardTask]:
        return list(self._tasks.values())

    def stop(self, task_id: str) -> TensorboardTask | None:
        task = self._tasks.get(task_id)
        if task is not None:
            task.stopped = True
            _end(task.process)
        return task

    def stop_all(self) -> list[TensorboardTask]:
        for task_id in list(self._tasks):
            self.stop(task_id)
        return self.all()


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
