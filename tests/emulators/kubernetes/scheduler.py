"""The default scheduler: binds pending pods to nodes that fit them, or says why none does.

A pod is considered after ``delay`` (so ``Pending`` without a node is always visible), then bound to the
first ready node that matches its ``nodeSelector`` and has room for its requests (cpu, memory, GPUs,
pods). When nothing fits, the pod gets ``PodScheduled=False``, reason ``Unschedulable`` and the
scheduler's message (``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.``). A test can also hold
all scheduling (quota exhausted) with :meth:`Scheduler.block`.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from .apiserver import ApiServer
from .clock import Clock
from .loop import Loop
from .quantity import parse, pod_requests
from .resources import POD_TYPE
from .store import Store

NODES = ("", "nodes")


class Scheduler(Loop):
    name = "scheduler"

    def __init__(
        self, api: ApiServer, store: Store, clock: Clock, *, delay: float, tick: float = 0.02
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.held: str | None = None  # the Unschedulable message while scheduling is held

    def block(self, message: str = "0/1 nodes are available: 1 Insufficient cpu.") -> None:
        """Keep every pod unscheduled with this message (quota exhausted) until :meth:`unblock`."""
        self.held = message

    def unblock(self) -> None:
        self.held = None

    def reconcile(self) -> None:
        pods = self.store.list(POD_TYPE.key)
        nodes = [n for n in self.store.list(NODES) if _ready(n) and not n["spec"].get("unschedulable")]
        used = _usage(pods)
        for pod in pods:
            meta = pod["metadata"]
            if pod["spec"].get("nodeName") or meta.get("deletionTimestamp"):
                continue
            if meta["uid"] not in self._not_before:
                self.hold(meta["uid"])
                continue
            if not self.due(meta["uid"]):
                continue
            node, message = self._place(pod, nodes, used)
            if node is None:
                self._unschedulable(pod, message)
            else:
                self._bind(pod, node)
                for name, amount in _requests(pod).items():
                    used.setdefault(node["metadata"]["name"], {}).setdefault(name, Decimal(0))
                    used[node["metadata"]["name"]][name] += amount

    def _place(
        self, pod: dict[str, Any], nodes: list[dict[str, Any]], used: dict[str, dict[str, Decimal]]
    ) -> tuple[dict[str, Any] | None, str]:
        if self.held is not None:
            return None, self.held
        for volume in pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if (
                claim
                and self.store.get(("", "persistentvolumeclaims"), pod["metadata"]["namespace"], claim)
                is None
            ):
                return None, f'0/{len(nodes)} nodes are available: persistentvolumeclaim "{claim}" not found.'
        reasons: Counter[str] = Counter()
        for node in nodes:
            why = _misfit(pod, node, used.get(node["metadata"]["name"], {}))
            if why is None:
                return node, ""
            reasons[why] += 1
        detail = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items()))
        return (
            None,
            f"0/{len(nodes)} nodes are available: {detail}."
            if detail
            else "no nodes available to schedule pods",
        )

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": self.api.now(),
        }
        conditions = (pod.get("status") or {}).get("conditions") or []
        old = next((c for c in conditions if c["type"] == "PodScheduled"), None)
        if old is not None and old.get("message") == message:
            return
        status = dict(pod.get("status") or {})
        status["conditions"] = [c for c in conditions if c["type"] != "PodScheduled"] + [condition]
        self._write(pod, status=status)
        self.api.record_event(pod, "Warning", "FailedScheduling", message, "default-scheduler")

    def _bind(self, pod: dict[str, Any], node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c["type"] != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.api.now(),
            }
        )
        status["conditions"] = conditions
        self._write(pod, status=status, node=name)
        self.api.record_event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {name}",
            "default-scheduler",
        )

    def _write(self, pod: dict[str, Any], *, status: dict[str, Any], node: str | None = None) -> None:
        with self.store.lock:
            meta = pod["metadata"]
            current = self.store.get(POD_TYPE.key, meta["namespace"], meta["name"])
            if (
                current is None
                or current["metadata"]["uid"] != meta["uid"]
                or current["spec"].get("nodeName")
            ):
                return
            current["status"] = status
            if node is not None:
                current["spec"]["nodeName"] = (
                    node  # the binding subresource: spec.nodeName is otherwise immutable
                )
            self.store.update(POD_TYPE.key, current)


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    requests = pod_requests(pod["spec"])
    requests["pods"] = Decimal(1)
    return requests


def _usage(pods: list[dict[str, Any]]) -> dict[str, dict[str, Decimal]]:
    used: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for name, amount in _requests(pod).items():
            used.setdefault(node, {}).setdefault(name, Decimal(0))
            used[node][name] += amount
    return used


def _misfit(pod: dict[str, Any], node: dict[str, Any], used: dict[str, Decimal]) -> str | None:
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod["spec"].get("nodeSelector") or {}).items()):
        return "node(s) didn't match Pod's node affinity/selector"
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for name, amount in sorted(_requests(pod).items()):
        limit = parse(allocatable.get(name, "0"))
        if used.get(name, Decimal(0)) + amount > limit:
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return None
