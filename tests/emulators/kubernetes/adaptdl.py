"""AdaptDL's scheduler: its validating webhook, the allocator and the job controller (``adaptdl_sched``).

- Webhook (``validator.py``): on create, the pod template is dry-run as a ``PodTemplate`` (an invalid pod
  spec is a 422 with the pod validation message) and ``maxReplicas < minReplicas`` is a 422; on update any
  change of ``spec`` is a 422 ``Forbidden`` ("updates to job spec are forbidden").
- Allocator: a pending job without an allocation gets one from the configured nodes (as many replicas as
  its min/max replicas allow and the nodes' free resources hold); :meth:`AdaptDLController.reallocate`
  injects a re-allocation, as the Pollux optimiser would.
- Controller (``controller._sync_job``): ``Pending → Starting`` (pods ``<job>-<uid>-<group>-<rank>`` with the
  ``adaptdl`` labels and annotations, ``ADAPTDL_*`` variables, ``group`` + 1) ``→ Running`` when every pod is
  ready; ``Stopping → Pending`` on re-allocation; ``Succeeded``/``Failed`` (tolerating evictions and, for
  preemptible jobs, deletions and exit 143) with ``completionTimestamp``; failed pods are kept. Status
  changes go through merge patches of the status subresource.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from . import errors as err
from . import fielderrors as fe
from .apiserver import ApiServer, DeleteOptions, ValidatingWebhook
from .clock import Clock
from .loop import Loop
from .podspec import default_pod_spec, validate_pod_spec
from .quantity import parse, pod_requests
from .resources import POD_TYPE, ResourceType
from .store import Store

GROUP = "adaptdl.petuum.com"
KEY = (GROUP, "adaptdljobs")
NODES = ("", "nodes")


def webhooks(name: str) -> list[ValidatingWebhook]:
    def check(operation: str, job: dict[str, Any], old: dict[str, Any] | None) -> err.ApiError | None:
        spec = job.get("spec") or {}
        if operation == "UPDATE":
            if old is not None and spec != old.get("spec"):
                return err.webhook_denied(name, 422, "Forbidden", "updates to job spec are forbidden")
            return None
        template = copy.deepcopy(spec.get("template") or {})
        default_pod_spec(template.setdefault("spec", {}))
        problems = validate_pod_spec(template["spec"], "template.spec")
        if problems:
            invalid = fe.invalid_error("PodTemplate", "", "spec.template", problems)
            return err.webhook_denied(name, 422, "Invalid", invalid.message)
        if spec.get("maxReplicas", float("inf")) < spec.get("minReplicas", 0):
            return err.webhook_denied(
                name, 422, "Invalid", "spec.maxReplicas must be greater than or equal to spec.minReplicas"
            )
        return None

    return [ValidatingWebhook(name, KEY, ("CREATE", "UPDATE"), check)]


def _isoformat(seconds: float) -> str:
    """How kubernetes_asyncio serialises a Python datetime (microseconds, ``+00:00``)."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()


class AdaptDLController(Loop):
    name = "adaptdl"

    def __init__(
        self,
        api: ApiServer,
        store: Store,
        clock: Clock,
        *,
        delay: float,
        tick: float = 0.02,
        supervisor_url: str = "http://adaptdl-supervisor:8080",
        version: str = "0.2.11",
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.supervisor_url = supervisor_url
        self.version = version

    def reconcile(self) -> None:
        rt = self.api.registry.find(GROUP, "v1", "adaptdljobs")
        if rt is None:
            return
        for job in self.store.list(rt.key):
            uid = job["metadata"]["uid"]
            if not self.due(uid):
                continue
            try:
                before = job.get("status") or {}
                if before.get("phase") == "Pending" and not before.get("allocation"):
                    self._allocate(rt, job)
                self._sync(rt, job)
            except err.ApiError as error:
                if error.code not in (404, 409):
                    raise

    def reallocate(self, namespace: str, name: str, allocation: list[str]) -> None:
        """What the allocator does when it re-optimises: a new ``status.allocation`` for a job."""
        rt = self.api.registry.find(GROUP, "v1", "adaptdljobs")
        if rt is None:
            raise ValueError("AdaptDL is not installed")
        self.api.patch(
            rt,
            namespace,
            name,
            "application/merge-patch+json",
            {"status": {"allocation": allocation}},
            subresource="status",
        )

    # ---- allocator -----------------------------------------------------------------------------------

    def _allocate(self, rt: ResourceType, job: dict[str, Any]) -> None:
        spec = job["spec"]
        wanted = max(min(1, spec.get("maxReplicas") or 1), spec.get("minReplicas") or 0)
        wanted = max(wanted, 1)
        free = self._free_resources()
        requests = pod_requests((spec.get("template") or {}).get("spec") or {})
        requests["pods"] = Decimal(1)
        allocation: list[str] = []
        for node, room in free.items():
            while len(allocation) < wanted and all(room.get(k, Decimal(0)) >= v for k, v in requests.items()):
                allocation.append(node)
                for k, v in requests.items():
                    room[k] = room.get(k, Decimal(0)) - v
        if len(allocation) >= max(spec.get("minReplicas") or 0, 1):
            self._patch(rt, job, {"allocation": allocation})

    def _free_resources(self) -> dict[str, dict[str, Decimal]]:
        free = {}
        for node in self.store.list(NODES):
            conditions = (node.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                continue
            free[node["metadata"]["name"]] = {
                k: parse(v) for k, v in (node["status"].get("allocatable") or {}).items()
            }
        for pod in self.store.list(POD_TYPE.key):
            node = pod["spec"].get("nodeName")
            if node in free and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                for k, v in {**pod_requests(pod["spec"]), "pods": Decimal(1)}.items():
                    free[node][k] = free[node].get(k, Decimal(0)) - v
        return free

    # ---- controller ----------------------------------------------------------------------------------

    def _pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        name = job["metadata"]["name"]
        return [
            p
            for p in self.store.list(POD_TYPE.key, job["metadata"]["namespace"])
            if (p["metadata"].get("labels") or {}).get("adaptdl/job") == name
        ]

    def _sync(self, rt: ResourceType, job: dict[str, Any]) -> None:
        pods = self._pods(job)
        invalid = _invalid_pods(pods)
        if invalid is not None:
            self._patch(rt, job, invalid)
            job = self.api.get(rt, job["metadata"]["namespace"], job["metadata"]["name"])
        old = job.get("status") or {}
        new = dict(old)
        allocation = old.get("allocation") or []
        phase = new.setdefault("phase", "Pending")
        replicas = old.get("replicas") or 0
        done = _completion(pods, job["spec"].get("preemptible", True))
        if done:
            new.update(done)
            new.setdefault("completionTimestamp", _isoformat(self.clock.now()))
            new["allocation"] = allocation = []
            self._delete_pods([p for p in pods if p["status"].get("phase") != "Failed"])
        elif phase == "Pending":
            if allocation and not pods:
                new["phase"] = "Starting"
        elif phase == "Starting":
            self._starting(job, new, pods, allocation, replicas)
        elif phase == "Running":
            if _restart(pods, allocation) or not pods:
                new["phase"] = "Stopping"
        elif phase == "Stopping":
            if pods:
                self._delete_pods(pods)
            else:
                new["phase"] = "Pending"
        if allocation:
            new["replicas"], new["readyReplicas"] = len(allocation), _ready(pods)
        else:
            new["allocation"] = new["replicas"] = new["readyReplicas"] = None
        patch = {k: v for k, v in new.items() if v != old.get(k)}
        if patch:
            self._patch(rt, job, patch)

    def _starting(
        self,
        job: dict[str, Any],
        new: dict[str, Any],
        pods: list[dict[str, Any]],
        allocation: list[str],
        replicas: int,
    ) -> None:
        if (_scheduled(pods) != replicas and _restart(pods, allocation)) or not allocation:
            new["phase"] = "Stopping"
        elif allocation and not pods:
            group = new.get("group")
            new["group"] = (-1 if group is None else int(group)) + 1
            created = []
            try:
                for rank in range(len(allocation)):
                    created.append(self._create_pod(job, allocation, new["group"], rank))
            except err.ApiError as error:
                new.update(
                    {
                        "phase": "Failed",
                        "reason": "PodCreationError",
                        "message": f"({error.code})\nReason: {error.reason}\n"
                        f"HTTP response body: {error.status}",
                    }
                )
                self._delete_pods(created)
        elif len(pods) != replicas:
            new["phase"] = "Stopping"
        elif _ready(pods) == replicas:
            new["phase"] = "Running"

    def _create_pod(
        self, job: dict[str, Any], allocation: list[str], group: int, rank: int
    ) -> dict[str, Any]:
        meta = job["metadata"]
        nodes = self.api.registry.by_key(*NODES)
        assert nodes is not None
        node = self.api.get(nodes, "", allocation[rank])
        pod = copy.deepcopy(job["spec"]["template"])
        pod.update({"apiVersion": "v1", "kind": "Pod"})
        pod_meta = pod.setdefault("metadata", {})
        pod_meta["name"] = f"{meta['name']}-{meta['uid']}-{group}-{rank}"
        pod_meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/v1",
                "controller": True,
                "blockOwnerDeletion": True,
                "kind": "AdaptDLJob",
                "name": meta["name"],
                "uid": meta["uid"],
            }
        ]
        pod_meta.setdefault("labels", {}).update(
            {"adaptdl": "true", "adaptdl/job": meta["name"], "petuum.com/nodegroup": "all"}
        )
        pod_meta.setdefault("annotations", {}).update(
            {
                "adaptdl/replicas": str(len(allocation)),
                "adaptdl/group": str(group),
                "adaptdl/rank": str(rank),
                "adaptdl/node": node["metadata"]["name"],
            }
        )
        spec = pod.setdefault("spec", {})
        spec.setdefault("nodeSelector", {})["kubernetes.io/hostname"] = node["metadata"]["labels"][
            "kubernetes.io/hostname"
        ]
        spec["hostname"] = f"{meta['name']}-{group}-{rank}"
        spec["restartPolicy"] = "Never"
        spec.setdefault("volumes", []).append({"name": "adaptdl-shm", "emptyDir": {"medium": "Memory"}})
        for container in spec.get("containers") or []:
            container.setdefault("volumeMounts", []).append({"name": "adaptdl-shm", "mountPath": "/dev/shm"})
            container.setdefault("env", []).extend(self._env(job, allocation, group, rank, container))
        return self.api.create(POD_TYPE, meta["namespace"], pod)

    def _env(
        self, job: dict[str, Any], allocation: list[str], group: int, rank: int, container: dict[str, Any]
    ) -> list[dict[str, str]]:
        meta = job["metadata"]
        env = [
            {"name": "ADAPTDL_JOB_ID", "value": f"{meta['namespace']}/{meta['name']}"},
            {"name": "ADAPTDL_MASTER_PORT", "value": str(47000 + group)},
            {"name": "ADAPTDL_NUM_NODES", "value": str(len(set(allocation)))},
            {"name": "ADAPTDL_NUM_RESTARTS", "value": str(group)},
            {"name": "ADAPTDL_NUM_REPLICAS", "value": str(len(allocation))},
            {"name": "ADAPTDL_REPLICA_RANK", "value": str(rank)},
            {"name": "ADAPTDL_SUPERVISOR_URL", "value": self.supervisor_url},
            {"name": "ADAPTDL_SCHED_VERSION", "value": self.version},
        ]
        if not ((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu"):
            env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"})
        return env

    def _delete_pods(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            try:
                self.api.delete(
                    POD_TYPE, pod["metadata"]["namespace"], pod["metadata"]["name"], DeleteOptions()
                )
            except err.ApiError as error:
                if error.code != 404:
                    raise

    def _patch(self, rt: ResourceType, job: dict[str, Any], status: dict[str, Any]) -> None:
        meta = job["metadata"]
        self.api.patch(
            rt,
            meta["namespace"],
            meta["name"],
            "application/merge-patch+json",
            {"status": status},
            subresource="status",
        )
        self.hold(meta["uid"])


def _annotation(pod: dict[str, Any], key: str) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(f"adaptdl/{key}"))


def _invalid_pods(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    groups, replicas, ranks = set(), set(), []
    for pod in pods:
        try:
            group, count, rank = (int(_annotation(pod, k)) for k in ("group", "replicas", "rank"))
            node = (pod["metadata"].get("annotations") or {})["adaptdl/node"]
        except (KeyError, ValueError):
            return {
                "phase": "Failed",
                "reason": "Invalid",
                "message": f"invalid annotations for pod {pod['metadata']['name']}",
            }
        if pod["spec"].get("nodeName") and pod["spec"]["nodeName"] != node:
            return {
                "phase": "Failed",
                "reason": "Invalid",
                "message": f"incorrect node for pod {pod['metadata']['name']}",
            }
        groups.add(group)
        replicas.add(count)
        ranks.append(rank)
    if len(groups) > 1 or len(replicas) > 1 or any(rank >= next(iter(replicas)) for rank in ranks):
        return {"phase": "Failed", "reason": "Invalid", "message": "inconsistent pods in group"}
    return None


def _completion(pods: list[dict[str, Any]], preemptible: bool) -> dict[str, Any]:
    if not pods:
        return {}
    if all(
        len(pods) == int(_annotation(p, "replicas")) and p["status"].get("phase") == "Succeeded" for p in pods
    ):
        return {"phase": "Succeeded"}
    for pod in pods:
        phase = pod["status"].get("phase")
        if phase != "Failed" and phase != "Unknown":
            continue
        reason = str(pod["status"].get("reason"))
        if reason == "UnexpectedAdmissionError" or reason.startswith("Outof"):
            continue
        exited_143 = any(
            ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 143
            for s in pod["status"].get("containerStatuses") or []
        )
        if preemptible and (pod["metadata"].get("deletionTimestamp") is not None or exited_143):
            continue
        return {"phase": "Failed", "reason": "PodFailure", "message": f"{pod['metadata']['name']} {phase}"}
    return {}


def _restart(pods: list[dict[str, Any]], allocation: list[str]) -> bool:
    for pod in pods:
        rank = int(_annotation(pod, "rank"))
        if (
            int(_annotation(pod, "replicas")) != len(allocation)
            or rank >= len(allocation)
            or _annotation(pod, "node") != allocation[rank]
        ):
            return True
    return False


def _ready(pods: list[dict[str, Any]]) -> int:
    return sum(
        1
        for p in pods
        if p["status"].get("containerStatuses")
        and all(s.get("ready") for s in p["status"]["containerStatuses"])
    )


def _scheduled(pods: list[dict[str, Any]]) -> int:
    return sum(
        1
        for p in pods
        if any(
            c["type"] == "PodScheduled" and c["status"] == "True" for c in p["status"].get("conditions") or []
        )
    )
