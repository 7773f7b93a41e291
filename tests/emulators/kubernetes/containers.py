"""One container of a pod as the kubelet tracks it: its process instances, state and restart count.

Each start is a new :class:`~tests.emulators.container.Container` (a new process, a new log file); the
state it shows is the ``V1ContainerState`` a client reads (``waiting``/``running``/``terminated`` with the
runtime's reasons), ``lastState`` keeps the previous termination across restarts.
"""

from __future__ import annotations

import hashlib
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..container import Container, Mount, container_env
from .clock import rfc3339


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class ContainerRun:
    spec: dict[str, Any]
    init: bool
    log_dir: Path
    restarts: int = 0
    process: Container | None = None
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    instances: list[Path] = field(default_factory=list)
    started_at: float | None = None
    restart_at: float | None = None  # clock time the back-off ends
    oom: bool = False
    stopping: bool = False

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def terminated(self) -> dict[str, Any] | None:
        return self.state.get("terminated")

    def container_id(self) -> str:
        return "containerd://" + _digest(f"{self.log_dir}/{len(self.instances)}")

    def start(self, argv: list[str], env: dict[str, str], mounts: list[Mount], now: float) -> None:
        log = self.log_dir / self.name / f"{len(self.instances)}.log"
        self.instances.append(log)
        self.process = Container(
            argv, env=container_env(env), stdout=log, mounts=mounts, cwd=self.spec.get("workingDir") or "/"
        )
        self.process.start()
        self.started_at = now
        self.oom = False
        self.stopping = False
        self.state = {"running": {"startedAt": rfc3339(now)}}

    def fail_to_start(self, message: str, now: float) -> None:
        """A command the runtime cannot run (``StartError``, exit code 128)."""
        self.instances.append(self.log_dir / self.name / f"{len(self.instances)}.log")
        self.instances[-1].parent.mkdir(parents=True, exist_ok=True)
        self.instances[-1].touch()
        self.started_at = now
        self.state = {
            "terminated": {
                "exitCode": 128,
                "reason": "StartError",
                "message": message,
                "startedAt": rfc3339(now),
                "finishedAt": rfc3339(now),
                "containerID": self.container_id(),
            }
        }

    def poll(self, now: float) -> bool:
        """True when the process just ended (its state is then ``terminated``)."""
        if self.process is None or not self.running:
            return False
        code = self.process.poll()
        if code is None:
            return False
        self.process.signal_tree(signal.SIGKILL)  # what the command left in the background dies with it
        reason = "OOMKilled" if self.oom and code == 137 else "Completed" if code == 0 else "Error"
        terminated = {
            "exitCode": code,
            "reason": reason,
            "startedAt": rfc3339(self.started_at or now),
            "finishedAt": rfc3339(now),
            "containerID": self.container_id(),
        }
        message = self._fallback_message(code)
        if message:
            terminated["message"] = message
        self.state = {"terminated": terminated}
        self.process = None
        return True

    def _fallback_message(self, code: int) -> str:
        """``FallbackToLogsOnError``: a failed container's message is the tail of its log (80 lines, 2 KiB)."""
        if (
            code == 0
            or self.spec.get("terminationMessagePolicy") != "FallbackToLogsOnError"
            or not self.instances
        ):
            return ""
        data = self.instances[-1].read_bytes() if self.instances[-1].exists() else b""
        return b"".join(data.splitlines(keepends=True)[-80:])[-2048:].decode(errors="replace")

    def signal(self, signo: int) -> None:
        if self.process is not None:
            self.process.signal_tree(signo)

    def kill_oom(self) -> None:
        self.oom = True
        self.signal(signal.SIGKILL)

    def back_off(self, now: float, seconds: float, pod_name: str, pod_namespace: str, pod_uid: str) -> None:
        """Keep the termination as ``lastState`` and wait ``seconds`` before the next start."""
        self.last_state = {"terminated": self.state["terminated"]}
        self.restart_at = now + seconds
        message = (
            f"back-off {_duration(seconds)} restarting failed container={self.name} "
            f"pod={pod_name}_{pod_namespace}({pod_uid})"
        )
        self.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}

    def status(self) -> dict[str, Any]:
        image = self.spec.get("image", "")
        status: dict[str, Any] = {
            "name": self.name,
            "state": self.state,
            "lastState": self.last_state,
            "ready": self.running and not self.init,
            "restartCount": self.restarts,
            "image": image,
            "imageID": f"docker.io/library/{image.split(':')[0]}@sha256:{_digest(image)}"
            if self.instances
            else "",
            "started": self.running,
        }
        if self.instances:
            status["containerID"] = self.container_id()
        return status


def _duration(seconds: float) -> str:
    if seconds >= 60:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes}m{rest}s"
    return f"{seconds:g}s"


def pod_phase(
    inits: list[ContainerRun], apps: list[ContainerRun], restart_policy: str, *, terminal: bool = False
) -> str:
    """The kubelet's ``getPhase`` over the containers' states."""
    for run in inits:
        done = run.terminated
        if done is None or done["exitCode"] != 0:
            failed = done is not None and restart_policy == "Never"
            return "Failed" if failed else "Pending"
    waiting = running = stopped = succeeded = 0
    for run in apps:
        if run.running:
            running += 1
        elif run.terminated is not None:
            stopped += 1
            succeeded += run.terminated["exitCode"] == 0
        elif run.last_state.get("terminated"):
            stopped += 1
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if terminal:
        return "Succeeded" if stopped == succeeded else "Failed"
    if restart_policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Failed" if restart_policy == "Never" else "Running"
