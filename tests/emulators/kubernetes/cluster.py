"""The emulated cluster: API server, control-plane loops, kubelet and the installable operators, wired up.

See the package docstring (``__init__.py``) for what a test uses; this module only assembles the parts.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..container import remove_created_mountpoints
from . import adaptdl, crds, kubeflow
from .apiserver import ApiServer
from .clock import Clock, ManualClock, SystemClock
from .control import Control
from .faults import Faults
from .frameworkcontroller import FrameworkController
from .garbage_collector import GarbageCollector
from .kubelet import BuiltinImage, Kubelet, KubeletConfig
from .loop import Loop
from .nodes import NodeConfig, NodeLifecycle, node_object
from .podenv import service_env
from .requestlog import RequestLog
from .resources import CRD_TYPE, NAMESPACE_TYPE, Registry, ResourceType
from .server import EmulatorHTTPServer
from .store import Store
from .strategies import PersistentVolumeClaimStrategy
from .volumes import VolumeHost

ALL_OPERATORS = ("kubeflow", "frameworkcontroller", "adaptdl")


@dataclass
class _Operator:
    crds: list[dict[str, Any]]
    controller: Loop
    webhooks: list[Any]


class KubernetesEmulator:
    """A Kubernetes cluster in this process, on a free port: ``start()``/``stop()`` or ``with``.

    What a test reads: ``url``, ``token``, ``kubeconfig`` (written at start), ``requests`` (every request),
    ``faults`` (API-level faults), ``clock``, ``operators``, ``errors()``; what it changes: ``install`` /
    ``uninstall`` an operator, ``restart_controller``, ``lose_node``, ``oom_kill``, ``fail_image_pulls``,
    ``block_scheduling``, ``drop_watches``, ``compact``, ``set_token``, ``advance`` (manual clock only),
    ``reallocate`` (AdaptDL). ``delay`` is how long, at least, every state a controller or the kubelet
    writes stays before the next (clock seconds); ``tick`` how often loops look at the clock (real seconds).
    """

    def __init__(
        self,
        directory: Path | str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = "emulator-token",
        user: str = "trialfleet",
        clock: Clock | None = None,
        delay: float = 0.05,
        tick: float = 0.02,
        operators: Iterable[str] = ALL_OPERATORS,
        nodes: Sequence[NodeConfig] = (NodeConfig("node-1"),),
        nfs_exports: Mapping[str, Path | str] | None = None,
        azure_shares: Mapping[str, Path | str] | None = None,
        kubelet: KubeletConfig | None = None,
        namespaces: Sequence[str] = ("default", "kube-system", "kube-public", "kube-node-lease"),
        watch_window: int = 1000,
        bookmark_interval: float = 1.0,
        watch_timeout: float = 1800.0,
        adaptdl_webhook: str = "adaptdl-validator.adaptdl.svc.cluster.local",
        storage_class: str = "standard",
        schedule_delay: float | None = None,
    ) -> None:
        self._temporary = directory is None
        self.directory = (
            Path(tempfile.mkdtemp(prefix="k8s-emulator-")) if directory is None else Path(directory)
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host, self._port = host, port
        self.token, self.user = token, user
        self.clock: Clock = clock or SystemClock()
        self.delay, self.tick = delay, tick
        self.requests = RequestLog()
        self.faults = Faults()
        self.server_errors: list[str] = []
        self.watch_timeout, self.bookmark_interval = watch_timeout, bookmark_interval
        self.store = Store(window=watch_window)
        self.registry = Registry()
        self.api = ApiServer(self.store, self.registry, self.clock)
        self.volumes = VolumeHost(
            self.directory / "state",
            nfs_exports={k: Path(v) for k, v in (nfs_exports or {}).items()},
            nfs_root=self.directory / "nfs",
            azure_shares={k: Path(v) for k, v in (azure_shares or {}).items()},
            azure_root=self.directory / "azurefile",
            pvc_root=self.directory / "pvc",
        )
        self.api.strategies[("", "persistentvolumeclaims")] = PersistentVolumeClaimStrategy(storage_class)
        self._storage_class_name = storage_class
        self.api.on_created.append(self._created)
        self.api.on_removed.append(self._removed)
        self._node_configs = list(nodes)
        self._namespaces = list(namespaces)
        self._kubelet_config = kubelet or KubeletConfig(
            create_delay=delay, restart_backoff=delay * 2, max_backoff=delay * 20
        )
        self._wanted_operators = list(operators)
        self._adaptdl_webhook = adaptdl_webhook
        self._schedule_delay = delay if schedule_delay is None else schedule_delay
        self.operators: dict[str, _Operator] = {}
        self._server: EmulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.control = Control(self)
        self.gc = GarbageCollector(self.api, self.store, self.clock, delay=delay, tick=tick)
        self.scheduler: Any = None
        self.kubelet: Any = None
        self.node_lifecycle: Any = None

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> KubernetesEmulator:
        self._server = EmulatorHTTPServer((self.host, self._port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="emu-k8s-http",
            daemon=True,
        )
        self._thread.start()
        from .scheduler import Scheduler

        self.scheduler = Scheduler(
            self.api, self.store, self.clock, delay=self._schedule_delay, tick=self.tick
        )
        self._kubelet_config.images.setdefault(
            "frameworkcontroller/frameworkbarrier",
            BuiltinImage(
                (sys.executable, "-I", str(Path(__file__).with_name("frameworkbarrier.py"))),
                {
                    "KUBE_APISERVER_ADDRESS": self.url,
                    "KUBE_APISERVER_TOKEN": self.token or "",
                    "BARRIER_CHECK_INTERVAL_SEC": str(self.delay),
                },
            ),
        )
        self.kubelet = Kubelet(
            self.api,
            self.store,
            self.clock,
            delay=self.delay,
            tick=self.tick,
            config=self._kubelet_config,
            volumes=self.volumes,
            service_env=service_env(self.host, self.port),
        )
        self.node_lifecycle = NodeLifecycle(
            self.api,
            self.store,
            self.clock,
            delay=self.delay,
            tick=self.tick,
            on_lost=self.kubelet.abandon_node,
        )
        for name in self._namespaces:
            self.api.create(
                NAMESPACE_TYPE, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
        for config in self._node_configs:
            self.add_node(config)
        self._storage_class()
        self.write_kubeconfig(self.kubeconfig)
        for loop in self.loops:
            loop.start()
        for name in self._wanted_operators:
            self.install(name)
        return self

    def set_scheduling_latency(self, seconds: float) -> None:
        """The scheduling-latency knob: every pod stays ``Pending`` without a node for ``seconds`` before the
        scheduler binds it (a busy cluster's queue; the reuse benchmark sets 10 s)."""
        self._schedule_delay = seconds
        if getattr(self, "scheduler", None) is not None:
            self.scheduler.delay = seconds

    def stop(self) -> None:
        for name in list(self.operators):
            self.operators[name].controller.stop()
        for loop in self.loops:
            loop.stop()
        if self._server is not None:
            self._server.stop_watches()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        remove_created_mountpoints()
        if self._temporary:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> KubernetesEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def loops(self) -> list[Loop]:
        return [
            loop for loop in (self.gc, self.scheduler, self.kubelet, self.node_lifecycle) if loop is not None
        ]

    @property
    def port(self) -> int:
        assert self._server is not None, "the emulator is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        user: dict[str, Any] = {"token": self.token} if self.token is not None else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": self.user, "user": user}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": self.user, "namespace": namespace},
                }
            ],
            "current-context": "emulator",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def errors(self) -> list[str]:
        """Unexpected failures inside the emulator (a test should end with none)."""
        loops = [*self.loops, *(op.controller for op in self.operators.values())]
        return [*self.server_errors, *(error for loop in loops for error in loop.errors)]

    # ---- operators -----------------------------------------------------------------------------------

    def _build(self, name: str) -> _Operator:
        args: dict[str, Any] = {"delay": self.delay, "tick": self.tick}
        if name == "kubeflow":
            return _Operator(
                [crds.tfjobs(), crds.pytorchjobs()],
                kubeflow.TrainingOperator(self.api, self.store, self.clock, **args),
                kubeflow.webhooks(),
            )
        if name == "frameworkcontroller":
            return _Operator(
                [crds.frameworks()], FrameworkController(self.api, self.store, self.clock, **args), []
            )
        if name == "adaptdl":
            controller = adaptdl.AdaptDLController(
                self.api, self.store, self.clock, **args, supervisor_url=f"{self.url}/_emu/adaptdl-supervisor"
            )
            return _Operator([crds.adaptdljobs()], controller, adaptdl.webhooks(self._adaptdl_webhook))
        raise ValueError(f"unknown operator {name!r}; known: {', '.join(ALL_OPERATORS)}")

    def install(self, name: str) -> None:
        """Install an operator: its CRDs, its validating webhooks and its controller."""
        if name in self.operators:
            return
        operator = self._build(name)
        for crd in operator.crds:
            if self.store.get(CRD_TYPE.key, "", crd["metadata"]["name"]) is None:
                self.api.create(CRD_TYPE, "", crd)
        self.api.webhooks.extend(operator.webhooks)
        operator.controller.start()
        self.operators[name] = operator

    def uninstall(self, name: str, *, keep_crds: bool = False) -> None:
        """Remove an operator; its CRDs too unless ``keep_crds`` (their objects go with them, as on a cluster)."""
        from .apiserver import DeleteOptions

        operator = self.operators.pop(name)
        operator.controller.stop()
        for webhook in operator.webhooks:
            self.api.webhooks.remove(webhook)
        if not keep_crds:
            for crd in operator.crds:
                self.api.delete(CRD_TYPE, "", crd["metadata"]["name"], DeleteOptions())

    def controller(self, name: str) -> Loop:
        for operator in self.operators.values():
            if operator.controller.name == name:
                return operator.controller
        for loop in self.loops:
            if loop.name == name:
                return loop
        raise KeyError(f"no controller {name!r}")

    def restart_controller(self, name: str) -> None:
        """Stop a controller and start it again with nothing in memory (its state is rebuilt from objects)."""
        self.controller(name).restart()

    # ---- cluster objects and faults ------------------------------------------------------------------

    def add_node(self, config: NodeConfig) -> None:
        nodes = self.registry.by_key("", "nodes")
        assert nodes is not None
        self.api.create(nodes, "", node_object(config, "127.0.0.1"))

    def _storage_class(self) -> None:
        """The default StorageClass every claim gets (provisioned at once into ``pvc_root``)."""
        classes = self.registry.by_key("storage.k8s.io", "storageclasses")
        assert classes is not None
        self.api.create(
            classes,
            "",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": self._storage_class_name,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": "emulator.local/hostpath",
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
            },
        )

    def lose_node(self, name: str) -> None:
        self.node_lifecycle.lose(name)

    def oom_kill(self, namespace: str, pod: str, container: str | None = None) -> None:
        self.kubelet.oom_kill(namespace, pod, container)

    def fail_image_pulls(self, pattern: str = "*") -> None:
        """Pulls of images matching the pattern (fnmatch) fail: ``ErrImagePull``/``ImagePullBackOff``."""
        self._kubelet_config.failing_images.append(pattern)

    def heal_image_pulls(self) -> None:
        self._kubelet_config.failing_images.clear()

    def block_scheduling(self, message: str = "0/1 nodes are available: 1 Insufficient cpu.") -> None:
        self.scheduler.block(message)

    def unblock_scheduling(self) -> None:
        self.scheduler.unblock()

    def drop_watches(self) -> int:
        """Cut every open watch connection now; returns how many were cut."""
        return self._server.drop_watches() if self._server is not None else 0

    def compact(self) -> None:
        """Forget the event history: every older resourceVersion now gets 410 Expired."""
        self.store.compact()

    def set_token(self, token: str | None) -> None:
        """Change the accepted bearer token (the kubeconfig's stops working: 401, as after expiry)."""
        self.token = token

    def advance(self, seconds: float) -> float:
        if not isinstance(self.clock, ManualClock):
            raise TypeError("the emulator runs on the system clock; give it a ManualClock to advance time")
        now = self.clock.advance(seconds)
        self.store.notify()
        return now

    def reallocate(self, namespace: str, name: str, allocation: list[str]) -> None:
        """An AdaptDL re-allocation (elastic rescale) of a job onto these nodes."""
        self.operators["adaptdl"].controller.reallocate(namespace, name, allocation)  # type: ignore[attr-defined]

    # ---- write hooks ---------------------------------------------------------------------------------

    def _created(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.key == CRD_TYPE.key:
            self.registry.set_crd(obj)
        elif rt.key == ("", "persistentvolumeclaims"):
            self._bind_claim(obj)

    def _removed(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.key == CRD_TYPE.key:
            self.registry.drop_crd(obj["metadata"]["name"])

    def _bind_claim(self, claim: dict[str, Any]) -> None:
        """Dynamic provisioning, at once: a PV backed by a directory, the claim Bound to it."""
        meta = claim["metadata"]
        volume_name = f"pvc-{meta['uid']}"
        directory = self.volumes.claim_dir(meta["namespace"], meta["name"])
        directory.mkdir(parents=True, exist_ok=True)
        spec = claim["spec"]
        capacity = {"storage": spec["resources"]["requests"]["storage"]}
        pvs = self.registry.by_key("", "persistentvolumes")
        assert pvs is not None
        self.api.create(
            pvs,
            "",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": volume_name},
                "spec": {
                    "capacity": capacity,
                    "accessModes": spec["accessModes"],
                    "hostPath": {"path": str(directory)},
                    "persistentVolumeReclaimPolicy": "Delete",
                    "storageClassName": spec.get("storageClassName"),
                    "claimRef": {
                        "kind": "PersistentVolumeClaim",
                        "namespace": meta["namespace"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "apiVersion": "v1",
                    },
                },
            },
        )
        with self.store.lock:
            current = self.store.get(("", "persistentvolumeclaims"), meta["namespace"], meta["name"])
            if current is None:
                return
            current["spec"]["volumeName"] = volume_name
            current["status"] = {"phase": "Bound", "accessModes": spec["accessModes"], "capacity": capacity}
            self.store.update(("", "persistentvolumeclaims"), current)
