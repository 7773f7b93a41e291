"""Nodes, and what the control plane does when one is lost.

Nodes are configured (name, capacity, labels) and exist as ``Node`` objects with a ``Ready`` condition.
Losing a node (:meth:`NodeLifecycle.lose`) kills its processes at once (the machine is gone) while their
pods keep the last status the kubelet posted; then, each step ``delay`` apart:
1. the node controller marks the node ``Ready=Unknown`` (``NodeStatusUnknown``, unreachable taints) and
   the node's pods ``Ready=False``;
2. taint-based eviction deletes the pods (``deletionTimestamp``, ``DisruptionTarget`` condition, reason
   ``DeletionByTaintManager``) - they stay ``Terminating`` since no kubelet confirms;
3. the node object is removed and the pod garbage collector marks its pods ``Failed``
   (``DisruptionTarget`` reason ``DeletionByPodGC``, ``PodGC: node no longer exists``);
4. then force-deletes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .apiserver import ApiServer, DeleteOptions
from .clock import Clock
from .loop import Loop
from .resources import POD_TYPE
from .store import Store

NODES = ("", "nodes")


@dataclass(frozen=True)
class NodeConfig:
    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    gpus: int = 0
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)


def node_object(config: NodeConfig, address: str) -> dict[str, Any]:
    capacity = {
        "cpu": config.cpu,
        "memory": config.memory,
        "pods": str(config.pods),
        "ephemeral-storage": "100Gi",
    }
    if config.gpus:
        capacity["nvidia.com/gpu"] = str(config.gpus)
    labels = {
        "kubernetes.io/hostname": config.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **config.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": config.name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": config.name},
            ],
            "conditions": [_ready("True", "KubeletReady", "kubelet is posting ready status")],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{config.name}",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "v1.30.0",
                "kubeletVersion": "v1.30.0",
                "machineID": f"machine-{config.name}",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12",
                "systemUUID": f"uuid-{config.name}",
            },
        },
    }


def _ready(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message}


class NodeLifecycle(Loop):
    name = "node-lifecycle"

    def __init__(
        self,
        api: ApiServer,
        store: Store,
        clock: Clock,
        *,
        delay: float,
        on_lost: Callable[[str], None],
        tick: float = 0.02,
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.on_lost = on_lost
        self.lost: dict[str, int] = {}  # node → step done

    def lose(self, node: str) -> None:
        self.lost[node] = 0
        self.on_lost(node)
        self.hold(node)

    def reconcile(self) -> None:
        for node, step in list(self.lost.items()):
            if step >= 4 or not self.due(node):
                continue
            [self._not_ready, self._evict, self._collect, self._force_delete][step](node)
            self.lost[node] = step + 1
            self.hold(node)

    def _pods(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.store.list(POD_TYPE.key) if p["spec"].get("nodeName") == node]

    def _not_ready(self, node: str) -> None:
        with self.store.lock:
            obj = self.store.get(NODES, "", node)
            if obj is not None:
                obj["status"]["conditions"] = [
                    _ready("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
                ]
                obj["spec"]["taints"] = [
                    {"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": self.api.now()}
                    for effect in ("NoSchedule", "NoExecute")
                ]
                self.store.update(NODES, obj)
            for pod in self._pods(node):
                self._set_conditions(
                    pod,
                    [
                        {
                            "type": "Ready",
                            "status": "False",
                            "lastProbeTime": None,
                            "lastTransitionTime": self.api.now(),
                        }
                    ],
                )

    def _evict(self, node: str) -> None:
        for pod in self._pods(node):
            with self.store.lock:
                self._set_conditions(
                    pod,
                    [
                        self._disruption(
                            "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"
                        )
                    ],
                )
                current = self.store.get(POD_TYPE.key, pod["metadata"]["namespace"], pod["metadata"]["name"])
                if current is not None and not current["metadata"].get("deletionTimestamp"):
                    current["metadata"]["deletionTimestamp"] = self.api.now()
                    current["metadata"]["deletionGracePeriodSeconds"] = 30
                    self.store.update(POD_TYPE.key, current)
            self.api.record_event(
                pod,
                "Normal",
                "TaintManagerEviction",
                f"Marking for deletion Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}",
                "taint-eviction-controller",
            )

    def _collect(self, node: str) -> None:
        with self.store.lock:
            if self.store.get(NODES, "", node) is not None:
                self.store.remove(NODES, "", node)
            for pod in self._pods(node):
                status = dict(pod.get("status") or {})
                if status.get("phase") not in ("Succeeded", "Failed"):
                    status["phase"] = "Failed"
                self._set_conditions(
                    pod, [self._disruption("DeletionByPodGC", "PodGC: node no longer exists")], status=status
                )

    def _force_delete(self, node: str) -> None:
        for pod in self._pods(node):
            self.api.delete(
                POD_TYPE,
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                DeleteOptions(grace_seconds=0),
            )

    def _disruption(self, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": self.api.now(),
        }

    def _set_conditions(
        self, pod: dict[str, Any], conditions: list[dict[str, Any]], status: dict[str, Any] | None = None
    ) -> None:
        with self.store.lock:
            current = self.store.get(POD_TYPE.key, pod["metadata"]["namespace"], pod["metadata"]["name"])
            if current is None:
                return
            new_status = dict(status or current.get("status") or {})
            kinds = {c["type"] for c in conditions}
            new_status["conditions"] = [
                c for c in new_status.get("conditions") or [] if c["type"] not in kinds
            ] + conditions
            current["status"] = new_status
            self.store.update(POD_TYPE.key, current)
