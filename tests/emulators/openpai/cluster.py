"""The cluster behind the rest server: its jobs, quota, pods and the controller loop that moves them.

``submit`` does what the job controller's ``update`` and the k8s model's ``put`` do once the protocol passed:
the duplicate check (409 forever: a job's name is never free again), the virtual-cluster permission (403),
``extras.storages`` (or the deprecated ``teamwise_storage`` plugin) resolved against the user's storages (404
``NoStorageError``; an empty list means the user's default storages), then the framework as FrameworkController
will run it, with a placeholder status (AttemptCreationPending) so a GET right after the 202 answers WAITING.
"""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path
from typing import Any

from ..container import Mount
from . import completion as fc
from .capacity import Quota
from .clock import Clock
from .config import ClusterConfig, User
from .controller import Controller
from .env import task_env
from .errors import PaiError, forbidden, no_job, not_found, uncaught
from .jscompat import UNDEFINED, string
from .kubelet import Kubelet
from .model import Framework, RoleSpec, Task
from .mustache import render_secrets
from .protocol import Protocol

RUNTIME_PLUGIN = "com.microsoft.pai.runtimeplugin"


def js_truthy(value: Any) -> bool:
    if value is None or value is UNDEFINED or value is False or (isinstance(value, str) and not value):
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return True  # JavaScript: every object and array, even an empty one


def _js_or(value: Any, default: Any) -> Any:
    return value if js_truthy(value) else default


def mask_secrets(text: str) -> str:
    """``protocolSecret.mask``: the ``secrets:`` block of the submitted text replaced by ``"******"``."""
    masked = re.sub(
        r"(^secrets:)[\s\S]*?(^\w)", r'\1 "******"\n\2', text + "\nZ", count=1, flags=re.MULTILINE
    )
    return masked[:-2]


class Cluster:
    def __init__(self, config: ClusterConfig, clock: Clock, workdir: Path) -> None:
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self.frameworks: dict[str, Framework] = {}
        self.quota = Quota.of(config.virtual_clusters)
        self.kubelet = Kubelet(workdir, config.timing.stop_grace)
        self.controller = Controller(self)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # the controller loop

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="openpai-controller", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.config.timing.tick):
            self.tick()

    def tick(self) -> None:
        with self.lock:
            now = self.clock.now()
            for fw in list(self.frameworks.values()):
                if not fw.completed:
                    self.controller.step(fw, now)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.kubelet.shutdown()

    # jobs

    def find(self, name: str) -> Framework:
        fw = self.frameworks.get(name)
        if fw is None:
            raise no_job(name)
        return fw

    def submit(self, user: User, protocol: Protocol) -> Framework:
        name = f"{user.name}~{protocol.name}"
        with self.lock:
            if name in self.frameworks:
                raise PaiError(409, "ConflictJobError", f"Job {name} already exists.")
            spec = protocol.spec
            defaults = spec.get("defaults", {})
            vc = defaults.get("virtualCluster")
            vc = "default" if vc is None else vc
            if not isinstance(vc, str) or vc not in user.virtual_clusters:
                raise forbidden(f"User {user.name} is not allowed to do operation in {string(vc)}")
            mounts = self._storages(user, spec)
            now = self.clock.now()
            fw = Framework(
                name=name,
                user=user.name,
                job_name=protocol.name,
                virtual_cluster=vc,
                protocol=protocol,
                config_text=mask_secrets(protocol.raw),
                roles=_roles(spec),
                max_retries=_js_or(spec.get("jobRetryCount"), 0),
                submission_time=float(int(now)),  # the rest server truncates it to the second
                state="AttemptCreationPending",
                entered=now,
                mounts=mounts,
            )
            self.frameworks[name] = fw
            return fw

    def _storages(self, user: User, spec: dict[str, Any]) -> list[dict[str, Any]]:
        if "extras" not in spec:
            return []
        extras = spec["extras"]
        if not js_truthy(extras.get("storages")) and RUNTIME_PLUGIN in extras:
            _convert_teamwise_storage(extras)
        storages = extras.get("storages")
        if not js_truthy(storages):
            return []
        if not isinstance(storages, list):
            if isinstance(storages, str):
                return []
            raise uncaught("config.extras.storages is not iterable")
        allowed = {s.name: s for s in self.config.user_storages(user)}
        if len(storages) == 0:
            storages.extend({"name": s.name, "share": s.share} for s in self.config.user_storages(user, True))
        resolved = []
        for item in storages:
            item_name = item.get("name") if isinstance(item, dict) else None
            if not item_name:
                continue
            if item_name not in allowed:
                raise not_found("NoStorageError", f"Storage {string(item_name)} is not found.")
            storage = allowed[item_name]
            source = storage.path if storage.share else storage.path / user.name
            target = item.get("mountPath") or f"/mnt/{item_name}"
            resolved.append(
                {"name": item_name, "source": source, "target": target, "readOnly": storage.read_only}
            )
        return resolved

    def execute(self, fw: Framework, value: str) -> None:
        with self.lock:
            fw.execution_type = "Stop" if value == "STOP" else "Start"

    def lose(self, name: str) -> None:
        """The framework vanishes from the cluster and its database: its pods die, GETs answer 404."""
        with self.lock:
            fw = self.frameworks.pop(name, None)
        if fw is None:
            raise no_job(name)
        for attempt in [fw.attempt] if fw.attempt else []:
            for task in attempt.all_tasks():
                self.controller.tasks.release(fw, task)
                self.kubelet.delete(task.attempt.pod_uid)

    def mark_seen(self, fw: Framework) -> None:
        fw.seen = True

    # pods

    def start_pod(self, fw: Framework, task: Task) -> bool:
        role = fw.role(task.role)
        pod = task.attempt
        assert pod.pod_uid is not None
        directory = self.kubelet.pod_dir(fw.user, fw.debug_id, task.role, pod.pod_uid)
        command = render_secrets(role.entrypoint, fw.protocol.spec.get("secrets"))
        mounts = [Mount(Path(m["source"]), m["target"], m["readOnly"]) for m in fw.mounts]
        try:
            self.kubelet.start(pod.pod_uid, directory, command, task_env(fw, task, self.config), mounts)
        except (OSError, ValueError) as error:  # e.g. a relative mountPath: the pod is refused
            pod.completion = fc.of_code(-200, f"Failed to create Pod: {error}")
            return False
        return True


def _convert_teamwise_storage(extras: dict[str, Any]) -> None:
    plugins = extras[RUNTIME_PLUGIN]
    if not isinstance(plugins, list):
        raise uncaught(f"config.extras['{RUNTIME_PLUGIN}'] is not iterable")
    for plugin in plugins:
        if not isinstance(plugin, dict) or plugin.get("plugin") != "teamwise_storage":
            continue
        parameters = plugin.get("parameters")
        names = parameters.get("storageConfigNames") if isinstance(parameters, dict) else None
        extras["storages"] = [{"name": n} for n in names] if isinstance(names, list) else []


def _roles(spec: dict[str, Any]) -> list[RoleSpec]:
    gang = spec.get("extras", {}).get("gangAllocation") is not False
    roles = []
    for name, role in spec["taskRoles"].items():
        instances = _js_or(role.get("instances"), 1)
        completion = role.get("completion") or {}
        resources = role["resourcePerInstance"]
        ports = dict(resources.get("ports") or {})
        for label in ("ssh", "http"):
            ports.setdefault(label, 1)
        roles.append(
            RoleSpec(
                name=name,
                fc_name="".join(c for c in name.lower() if c.isascii() and c.isalnum()),
                instances=instances,
                min_failed=_js_or(completion.get("minFailedInstances"), 1),
                min_succeeded=_js_or(completion.get("minSucceededInstances"), instances),
                max_task_retries=0 if gang else _js_or(role.get("taskRetryCount"), 0),
                cpu=int(resources["cpu"]),
                memory_mb=int(resources["memoryMB"]),
                gpu=int(resources["gpu"]),
                entrypoint=role["entrypoint"],
                ports=ports,
            )
        )
    return roles


__all__ = ["Cluster", "mask_secrets"]
