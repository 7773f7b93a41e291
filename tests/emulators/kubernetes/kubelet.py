"""The kubelet of every emulated node: runs the containers of scheduled pods and reports their status.

For each pod bound to a healthy node:
- ``ContainerCreating`` for at least ``create_delay`` (volumes and environment resolved meanwhile; a volume
  that cannot be mounted, a missing ConfigMap/Secret or a failing image pull keeps the pod there);
- init containers one after the other, then the containers, each command run as a local process
  (:class:`~tests.emulators.container.Container`) with the pod's environment and mounts;
- exits become ``terminated`` (``Completed``/``Error``/``OOMKilled``); ``OnFailure``/``Always`` restart the
  container in place after a ``CrashLoopBackOff`` (``restartCount`` + 1, ``lastState`` kept);
- the phase follows the kubelet's ``getPhase``; a deleted pod gets SIGTERM, SIGKILL after its grace
  period (capped by ``kill_grace``), its final status, and is then removed.
Every status the kubelet writes stays for at least ``delay`` seconds of the clock before the next.
"""

from __future__ import annotations

import fnmatch
import shutil
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import errors as err
from . import podlogs
from .apiserver import ApiServer, DeleteOptions
from .clock import Clock, rfc3339
from .containers import ContainerRun, pod_phase
from .loop import Loop
from .podenv import ConfigError, container_env, expand
from .resources import POD_TYPE
from .store import Store
from .volumes import VolumeError, VolumeHost, pod_mounts

_PREPARE_ERRORS = ("CreateContainerConfigError", "ErrImagePull", "ImagePullBackOff")


@dataclass(frozen=True)
class BuiltinImage:
    """What an image runs when the pod gives no command (its entrypoint), for images the emulator knows."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class KubeletConfig:
    create_delay: float = 0.1
    restart_backoff: float = 10.0
    max_backoff: float = 300.0
    kill_grace: float = 5.0  # at most this many real seconds between SIGTERM and SIGKILL
    images: dict[str, BuiltinImage] = field(default_factory=dict)
    failing_images: list[str] = field(default_factory=list)  # fnmatch patterns: pulls fail


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    directory: Path
    ip: str
    inits: list[ContainerRun]
    apps: list[ContainerRun]
    started: str
    prepared: bool = False
    finished: bool = False
    abandoned: bool = False
    mounts: dict[str, Any] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    kill_deadline: float | None = None
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # condition → (status, time)
    failed_mount: str = ""

    @property
    def runs(self) -> list[ContainerRun]:
        return [*self.inits, *self.apps]


def image_repository(image: str) -> str:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: name.rfind(":")]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts[0] == "library" and len(parts) > 1:
        parts = parts[1:]
    return "/".join(parts)


class Kubelet(Loop):
    name = "kubelet"

    def __init__(
        self,
        api: ApiServer,
        store: Store,
        clock: Clock,
        *,
        delay: float,
        config: KubeletConfig,
        volumes: VolumeHost,
        service_env: Mapping[str, str],
        tick: float = 0.02,
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.config = config
        self.volumes = volumes
        self.service_env = dict(service_env)
        self.runtimes: dict[str, PodRuntime] = {}
        self.lost_nodes: set[str] = set()
        self._next_ip = 2

    # ---- the loop ------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        present = set()
        nodes = {n["metadata"]["name"] for n in self.store.list(("", "nodes"))} - self.lost_nodes
        for pod in self.store.list(POD_TYPE.key):
            if pod["spec"].get("nodeName") not in nodes:  # unbound, or bound to a node no kubelet runs
                continue
            uid = pod["metadata"]["uid"]
            present.add(uid)
            runtime = self.runtimes.get(uid) or self._admit(pod)
            if runtime.abandoned or not self.due(uid):
                continue
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(runtime, pod)
            elif not runtime.finished:
                self._sync(runtime, pod)
        for uid in [uid for uid in self.runtimes if uid not in present and not self.runtimes[uid].abandoned]:
            self._discard(uid)

    def stop(self) -> None:
        super().stop()
        for uid in list(self.runtimes):
            self._discard(uid)

    def restart(self) -> None:
        """A kubelet restart keeps the containers running (they belong to the runtime, not the kubelet)."""
        Loop.stop(self)
        self.reset()
        self.start()

    def _admit(self, pod: dict[str, Any]) -> PodRuntime:
        meta = pod["metadata"]
        directory = self.volumes.state_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
        logs = directory / "logs"
        ip = f"127.0.{self._next_ip // 250}.{self._next_ip % 250 + 2}"
        self._next_ip += 1
        runtime = PodRuntime(
            meta["uid"],
            meta["namespace"],
            meta["name"],
            directory,
            ip,
            [ContainerRun(c, True, logs) for c in pod["spec"].get("initContainers") or []],
            [ContainerRun(c, False, logs) for c in pod["spec"].get("containers") or []],
            rfc3339(self.clock.now()),
        )
        if runtime.inits:
            for run in runtime.runs:
                run.state = {"waiting": {"reason": "PodInitializing"}}
        self.runtimes[meta["uid"]] = runtime
        self._write_status(runtime, pod)
        self.hold(meta["uid"], max(self.config.create_delay, self.delay))
        return runtime

    def _discard(self, uid: str) -> None:
        runtime = self.runtimes.pop(uid)
        for run in runtime.runs:
            run.signal(signal.SIGKILL)
        shutil.rmtree(runtime.directory, ignore_errors=True)
        self.forget(uid)

    # ---- running pods --------------------------------------------------------------------------------

    def _sync(self, runtime: PodRuntime, pod: dict[str, Any]) -> None:
        now = self.clock.now()
        if not runtime.prepared and not self._prepare(runtime, pod):
            self._write_status(runtime, pod)
            return
        policy = pod["spec"].get("restartPolicy", "Always")
        if self._run_inits(runtime, pod, policy, now):
            for run in runtime.apps:
                self._drive(runtime, pod, run, policy, now)
        phase = pod_phase(runtime.inits, runtime.apps, policy)
        runtime.finished = phase in ("Succeeded", "Failed")
        self._write_status(runtime, pod)

    def _prepare(self, runtime: PodRuntime, pod: dict[str, Any]) -> bool:
        ready = True
        for run in runtime.runs:
            pattern = next(
                (p for p in self.config.failing_images if fnmatch.fnmatch(run.spec.get("image", ""), p)), None
            )
            if pattern is not None:
                self._pull_failed(runtime, pod, run)
                ready = False
                continue
            try:
                runtime.mounts[run.name] = pod_mounts(
                    self.volumes,
                    pod,
                    run.spec,
                    runtime.directory,
                    self._lookup,
                    {"namespace": runtime.namespace, "token": "emulator", "ca.crt": ""},
                )
                runtime.env[run.name] = container_env(pod, run.spec, self._lookup, self.service_env)
            except VolumeError as error:
                if runtime.failed_mount != str(error):
                    runtime.failed_mount = str(error)
                    self.api.record_event(pod, "Warning", "FailedMount", str(error), "kubelet")
                ready = False
            except ConfigError as error:
                run.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(error)}}
                ready = False
        if ready:
            fresh = "PodInitializing" if runtime.inits else "ContainerCreating"
            for run in runtime.runs:
                if run.state.get("waiting", {}).get("reason") in _PREPARE_ERRORS:
                    run.state = {"waiting": {"reason": fresh}}
        runtime.prepared = ready
        return ready

    def _pull_failed(self, runtime: PodRuntime, pod: dict[str, Any], run: ContainerRun) -> None:
        image = run.spec.get("image", "")
        if run.state.get("waiting", {}).get("reason") == "ErrImagePull":
            run.state = {
                "waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
            }
            return
        message = (
            f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
            "pull access denied, repository does not exist or may require authorization"
        )
        run.state = {"waiting": {"reason": "ErrImagePull", "message": message}}
        self.api.record_event(
            pod, "Warning", "Failed", f'Failed to pull image "{image}": {message}', "kubelet"
        )

    def _run_inits(self, runtime: PodRuntime, pod: dict[str, Any], policy: str, now: float) -> bool:
        """Drive the current init container; True once all of them succeeded."""
        for run in runtime.inits:
            done = run.terminated
            if done is not None and done["exitCode"] == 0:
                continue
            self._drive(runtime, pod, run, "Never" if policy == "Never" else "OnFailure", now)
            return False
        return True

    def _drive(
        self, runtime: PodRuntime, pod: dict[str, Any], run: ContainerRun, policy: str, now: float
    ) -> None:
        waiting = run.state.get("waiting", {}).get("reason")
        if waiting in ("ContainerCreating", "PodInitializing"):
            self._start(runtime, pod, run, policy, now)
        elif waiting == "CrashLoopBackOff" and run.restart_at is not None and now >= run.restart_at:
            run.restarts += 1
            self._start(runtime, pod, run, policy, now)
        elif run.poll(now):
            self._exited(runtime, run, policy, now)

    def _exited(self, runtime: PodRuntime, run: ContainerRun, policy: str, now: float) -> None:
        code = run.terminated["exitCode"] if run.terminated else 0
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            seconds = min(self.config.restart_backoff * 2**run.restarts, self.config.max_backoff)
            run.back_off(now, seconds, runtime.name, runtime.namespace, runtime.uid)

    def _start(
        self, runtime: PodRuntime, pod: dict[str, Any], run: ContainerRun, policy: str, now: float
    ) -> None:
        env = runtime.env[run.name]
        argv = self._argv(run.spec, env)
        if argv is None:
            run.fail_to_start(
                "the emulator does not know the entrypoint of image "
                f"{run.spec.get('image')!r}: give the container a command",
                now,
            )
            self._exited(runtime, run, policy, now)
            return
        builtin = self.config.images.get(image_repository(run.spec.get("image", "")))
        if builtin is not None and not run.spec.get("command"):
            env = {**env, **builtin.env}
        run.start(argv, env, runtime.mounts.get(run.name, []), now)
        self.api.record_event(pod, "Normal", "Started", f"Started container {run.name}", "kubelet")

    def _argv(self, spec: dict[str, Any], env: dict[str, str]) -> list[str] | None:
        command = [expand(str(part), env) for part in spec.get("command") or []]
        args = [expand(str(part), env) for part in spec.get("args") or []]
        if command:
            return command + args
        builtin = self.config.images.get(image_repository(spec.get("image", "")))
        if builtin is not None:
            return list(builtin.argv) + args
        return args or None  # images whose entrypoint is empty run their args

    # ---- deletion ------------------------------------------------------------------------------------

    def _terminate(self, runtime: PodRuntime, pod: dict[str, Any]) -> None:
        now = self.clock.now()
        if runtime.kill_deadline is None:
            grace = pod["metadata"].get("deletionGracePeriodSeconds", 30) or 0
            runtime.kill_deadline = time.monotonic() + min(grace, self.config.kill_grace)
            for run in runtime.runs:
                run.restart_at = None
                run.signal(signal.SIGTERM)
        alive = [run for run in runtime.runs if run.running and not run.poll(now)]
        if alive and time.monotonic() < runtime.kill_deadline:
            return
        for run in alive:
            run.signal(signal.SIGKILL)
        if any(run.running and not run.poll(now) for run in runtime.runs):
            return
        runtime.finished = True
        self._write_status(runtime, pod, terminal=True)
        meta = pod["metadata"]
        try:
            self.api.delete(
                POD_TYPE, meta["namespace"], meta["name"], DeleteOptions(grace_seconds=0, uid=meta["uid"])
            )
        except err.ApiError as error:
            if error.code not in (404, 409):
                raise

    # ---- status --------------------------------------------------------------------------------------

    def _write_status(self, runtime: PodRuntime, pod: dict[str, Any], *, terminal: bool = False) -> None:
        policy = pod["spec"].get("restartPolicy", "Always")
        phase = pod_phase(runtime.inits, runtime.apps, policy, terminal=terminal)
        with self.store.lock:
            current = self.store.get(POD_TYPE.key, runtime.namespace, runtime.name)
            if current is None or current["metadata"]["uid"] != runtime.uid:
                return
            status = dict(current.get("status") or {})
            status.update(
                {
                    "phase": phase,
                    "hostIP": "127.0.0.1",
                    "hostIPs": [{"ip": "127.0.0.1"}],
                    "podIP": runtime.ip,
                    "podIPs": [{"ip": runtime.ip}],
                    "startTime": runtime.started,
                    "containerStatuses": [run.status() for run in runtime.apps],
                }
            )
            if runtime.inits:
                status["initContainerStatuses"] = [run.status() for run in runtime.inits]
            status["conditions"] = self._conditions(runtime, status.get("conditions") or [], phase)
            if status != current.get("status"):
                current["status"] = status
                self.store.update(POD_TYPE.key, current)
                self.hold(runtime.uid)

    def _conditions(self, runtime: PodRuntime, old: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
        inits_done = all(r.terminated is not None and r.terminated["exitCode"] == 0 for r in runtime.inits)
        unready = [r.name for r in runtime.apps if not r.running]
        ready = not unready and phase == "Running"
        completed = phase in ("Succeeded", "Failed")
        owned = {
            "Initialized": ("True", "", "")
            if inits_done
            else (
                "False",
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(r.name for r in runtime.inits if r.terminated is None)}]",
            ),
            "Ready": ("True", "", "")
            if ready
            else (
                ("False", "PodCompleted", "")
                if completed
                else ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
            ),
        }
        owned["ContainersReady"] = owned["Ready"]
        kept = [c for c in old if c["type"] not in owned]
        now = rfc3339(self.clock.now())
        result = []
        for kind, (state, reason, message) in owned.items():
            before = runtime.transitions.get(kind)
            since = before[1] if before and before[0] == state else now
            runtime.transitions[kind] = (state, since)
            condition = {"type": kind, "status": state, "lastProbeTime": None, "lastTransitionTime": since}
            if reason:
                condition["reason"] = reason
            if message:
                condition["message"] = message
            result.append(condition)
        return [*kept, *result]

    def _lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(("", plural), namespace, name)

    # ---- faults --------------------------------------------------------------------------------------

    def oom_kill(self, namespace: str, name: str, container: str | None = None) -> None:
        """The container (the pod's first when None) is killed by the OOM killer: exit 137, ``OOMKilled``."""
        runtime = self._runtime(namespace, name)
        run = next((r for r in runtime.apps if container in (None, r.name)), None)
        if run is None or not run.running:
            raise ValueError(f"container {container!r} of pod {namespace}/{name} is not running")
        run.kill_oom()
        self.store.notify()

    def abandon_node(self, node: str) -> None:
        """The node is gone: its processes die with it and nothing reports their end."""
        self.lost_nodes.add(node)
        for pod in self.store.list(POD_TYPE.key):
            runtime = self.runtimes.get(pod["metadata"]["uid"])
            if pod["spec"].get("nodeName") == node and runtime is not None:
                runtime.abandoned = True
                for run in runtime.runs:
                    run.signal(signal.SIGKILL)

    def _runtime(self, namespace: str, name: str) -> PodRuntime:
        pod = self.store.get(POD_TYPE.key, namespace, name)
        if pod is None or pod["metadata"]["uid"] not in self.runtimes:
            raise ValueError(f"pod {namespace}/{name} is not running on a kubelet")
        return self.runtimes[pod["metadata"]["uid"]]

    # ---- logs ----------------------------------------------------------------------------------------

    def _log_target(
        self,
        namespace: str,
        name: str,
        container: str | None,
        previous: bool,
        timestamps: bool,
        since_seconds: int | None,
    ) -> tuple[PodRuntime | None, ContainerRun | None, Path]:
        podlogs.check_options(timestamps, since_seconds)
        pod = self.api.get(POD_TYPE, namespace, name)
        runtime = self.runtimes.get(pod["metadata"]["uid"])
        node = pod["spec"].get("nodeName")
        if node in self.lost_nodes:
            raise err.internal(
                f'Get "https://{node}:10250/containerLogs/{namespace}/{name}": dial tcp: connect: no route to host'
            )
        runs = {r.name: r for r in runtime.runs} if runtime is not None else {}
        run = podlogs.choose(pod, runs, container)
        chosen = container or (run.name if run is not None else pod["spec"]["containers"][0]["name"])
        return runtime, run, podlogs.instance(pod, run, chosen, previous)

    def read_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        previous: bool = False,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
        timestamps: bool = False,
    ) -> bytes:
        _, _, path = self._log_target(namespace, name, container, previous, timestamps, since_seconds)
        return podlogs.cut(path.read_bytes() if path.exists() else b"", tail_lines, limit_bytes)

    def follow_log(
        self,
        namespace: str,
        name: str,
        *,
        container: str | None = None,
        previous: bool = False,
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[bytes]:
        runtime, run, path = self._log_target(namespace, name, container, previous, timestamps, since_seconds)
        first = podlogs.cut(path.read_bytes() if path.exists() else b"", tail_lines, limit_bytes)
        instance = len(run.instances) if run is not None else 0

        def alive() -> bool:
            return (
                not previous
                and run is not None
                and run.running
                and len(run.instances) == instance
                and runtime is not None
                and runtime.uid in self.runtimes
            )

        return podlogs.follow(path, first, alive)
