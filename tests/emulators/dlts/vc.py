"""A VC (team) record as ``GetVC``/``ListVCs`` return it, with the usage the cluster status reports.

The ``vc`` table keeps ``quota`` and ``metadata`` as JSON *strings* (NNI read ``metadata``'s first key as the
GPU type); ``get_vc`` adds the VC's status from the latest cluster status. Only GPUs are accounted for here:
CPU and memory figures are fixed per node.
"""

from __future__ import annotations

import json
from typing import Any

from tests.emulators.dlts.config import Team, alias_of
from tests.emulators.dlts.jobs import ACTIVE_STATUS, Job

CPUS_PER_NODE = 24
MEMORY_PER_NODE_GI = 224


def job_gpus(job: Job) -> int:
    """``get_resource_params_from_job_params`` for GPUs: ``gpu_limit``, else ``resourcegpu``, at least 0."""
    try:
        return max(0, int(job.params.get("gpu_limit", job.params.get("resourcegpu", 0))))
    except (TypeError, ValueError):
        return 0


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def resource_quota(team: Team) -> str:
    nodes = max(1, -(-team.gpus // max(team.gpus_per_node, 1)))
    return _compact(
        {
            "cpu": {team.sku: CPUS_PER_NODE * nodes * 0.9},
            "memory": {team.sku: f"{MEMORY_PER_NODE_GI * nodes}Gi"},
            "gpu": {team.sku: team.gpus},
            "gpu_memory": {team.sku: 0},
        }
    )


def resource_metadata(team: Team) -> str:
    return _compact(
        {
            "cpu": {team.sku: {"per_node": CPUS_PER_NODE, "schedulable_ratio": 0.9}},
            "memory": {team.sku: {"per_node": f"{MEMORY_PER_NODE_GI}Gi", "schedulable_ratio": 0.9}},
            "gpu": {team.sku: {"per_node": team.gpus_per_node, "gpu_type": team.gpu_type}},
            "gpu_memory": {team.sku: {"per_node": "0Gi"}},
        }
    )


def vc_row(team: Team) -> dict[str, Any]:
    """A row of ``DataManager.ListVCs``."""
    return {
        "vcName": team.name,
        "quota": team.quota_json(),
        "metadata": team.metadata_json(),
        "resourceQuota": resource_quota(team),
        "resourceMetadata": resource_metadata(team),
    }


def _usage(jobs: list[Job], preemptible: bool) -> dict[str, int]:
    """GPUs in use by alias, for jobs holding pods (scheduling or running) of the given kind."""
    usage: dict[str, int] = {}
    for job in jobs:
        if (
            job.status in ("scheduling", "running")
            and bool(job.params.get("preemptionAllowed")) == preemptible
        ):
            alias = alias_of(job.user_name)
            usage[alias] = usage.get(alias, 0) + job_gpus(job)
    return usage


def vc_status(team: Team, jobs: list[Job], node_status: list[dict[str, Any]]) -> dict[str, Any]:
    """``get_vc``: the row, the VC's status, the cluster's node list and the legacy misspelled keys."""
    used, preemptable = _usage(jobs, False), _usage(jobs, True)
    used_total, preemptable_total = sum(used.values()), sum(preemptable.values())
    available = max(0, team.gpus - used_total)
    sku = team.sku
    record = vc_row(team)
    record.update(
        {
            "gpu_capacity": {sku: team.gpus},
            "gpu_used": {sku: used_total},
            "gpu_preemptable_used": {sku: preemptable_total},
            "gpu_available": {sku: available},
            "gpu_unschedulable": {sku: 0},
            "gpu_reserved": {sku: 0},
            "user_status": [{"userName": name, "userGPU": {sku: n}} for name, n in used.items()],
            "user_status_preemptable": [
                {"userName": name, "userGPU": {sku: n}} for name, n in preemptable.items()
            ],
            "available_job_num": sum(1 for j in jobs if j.status in ACTIVE_STATUS),
            "node_status": node_status,
        }
    )
    record["gpu_avaliable"] = record["gpu_available"]
    record["AvaliableJobNum"] = record["available_job_num"]
    return record


def node_status(teams: list[Team]) -> list[dict[str, Any]]:
    """The cluster's worker nodes: enough of each team's SKU to hold its GPU quota."""
    nodes = []
    for team in teams:
        count = max(1, -(-team.gpus // max(team.gpus_per_node, 1)))
        for index in range(count):
            nodes.append(
                {
                    "name": f"{team.name.lower()}-worker-{index}",
                    "InternalIP": "127.0.0.1",
                    "labels": {"worker": "active", "sku": team.sku},
                    "unschedulable": False,
                    "gpu_capacity": {team.sku: team.gpus_per_node},
                    "gpu_allocatable": {team.sku: team.gpus_per_node},
                }
            )
    return nodes


__all__ = ["job_gpus", "node_status", "vc_row", "vc_status"]
