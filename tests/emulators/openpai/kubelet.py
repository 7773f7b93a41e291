"""Runs each task attempt's pod as a local :class:`~tests.emulators.container.Container`.

A pod's directory holds what the log manager serves for it (``user-stdout``, ``user-stderr``, ``user-all``,
``runtime.log``), the runtime's scripts, and ``workdir``, the container's working directory. Storages are
bind-mounted at their container paths; deleting a pod SIGTERMs its whole process tree, SIGKILLs after the grace
(or, with ``term_first`` off, SIGKILLs it at once: the PAI runtime, the container's first process, ends on the
SIGTERM sent to it alone, and the container's other processes die with it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..container import Container, Mount, container_env, remove_created_mountpoints
from . import runtime


@dataclass
class Pod:
    uid: str
    directory: Path
    container: Container
    deleting: bool = False
    exit: runtime.ExitInfo | None = None
    stopper: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Kubelet:
    def __init__(self, root: Path, stop_grace: float) -> None:
        self.root = root
        self.stop_grace = stop_grace
        self.term_first = True  # a deleted pod's processes get SIGTERM before the SIGKILL
        self.pods: dict[str, Pod] = {}
        self._lock = threading.Lock()

    def pod_dir(self, user: str, framework: str, role: str, pod_uid: str) -> Path:
        """Where the log manager finds a pod's logs: ``<user>/<framework>/<role>/<pod uid>``."""
        return self.root / "logs" / user / framework / role / pod_uid

    def start(
        self, pod_uid: str, directory: Path, command: str, env: dict[str, str], mounts: list[Mount]
    ) -> None:
        argv = runtime.prepare(directory, command)
        workdir = directory / "workdir"
        workdir.mkdir(exist_ok=True)
        for mount in mounts:
            mount.source.mkdir(
                parents=True, exist_ok=True
            )  # a subPath is created on first use, as kubelet does
        container = Container(
            argv,
            env=container_env(env),
            stdout=directory / "container.log",
            mounts=mounts,
            cwd=str(workdir),
        )
        container.start()
        with self._lock:
            self.pods[pod_uid] = Pod(pod_uid, directory, container)

    def _pod(self, pod_uid: str | None) -> Pod | None:
        with self._lock:
            return self.pods.get(pod_uid) if pod_uid else None

    def finished(self, pod_uid: str | None) -> runtime.ExitInfo | None:
        """The pod's exit once its command ended by itself (None while it runs, or once it is being deleted)."""
        pod = self._pod(pod_uid)
        if pod is None or pod.deleting:
            return None
        with pod.lock:
            if pod.exit is None and pod.container.poll() is not None:
                pod.exit = self._exit(pod)
            return pod.exit

    @staticmethod
    def _exit(pod: Pod) -> runtime.ExitInfo:
        process = pod.container.process
        assert process is not None and process.returncode is not None
        if process.returncode < 0:  # the runtime itself was killed: no exit handler ran
            return runtime.ExitInfo(128 - process.returncode, None)
        return runtime.exit_info(process.returncode, pod.directory)

    def delete(self, pod_uid: str | None) -> None:
        pod = self._pod(pod_uid)
        if pod is None or pod.deleting:
            return
        pod.deleting = True
        pod.stopper = threading.Thread(
            target=pod.container.stop, args=(self.stop_grace,), kwargs={"term": self.term_first}, daemon=True
        )
        pod.stopper.start()

    def gone(self, pod_uid: str | None) -> bool:
        """No process of the pod is left."""
        pod = self._pod(pod_uid)
        if pod is None:
            return True
        if pod.stopper is not None:
            return not pod.stopper.is_alive()
        return pod.container.poll() is not None

    def shutdown(self) -> None:
        with self._lock:
            pods = list(self.pods.values())
        for pod in pods:
            self.delete(pod.uid)
        for pod in pods:
            if pod.stopper is not None:
                pod.stopper.join()
        remove_created_mountpoints()


__all__ = ["Kubelet", "Pod"]
