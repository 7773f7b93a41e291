"""The dashboard's team, user and listing routes (``controllers/teams.js``, ``team/*.js``, ``user.js``, v2)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from tests.emulators.dlts.backend import Backend
from tests.emulators.dlts.config import EmulatorConfig, password_for
from tests.emulators.dlts.web import Request, Response, error, flask_value, json_body

VERSION = "0.1.0"  # the dashboard's package.json
_CATEGORIES = ("finishedJobs", "queuedJobs", "runningJobs", "visualizationJobs")


def version() -> Response:
    return json_body({"version": VERSION})


def user(config: EmulatorConfig, email: str) -> Response:
    """``User.toJSON`` of a password login: no uid, gid or names, which JSON leaves out."""
    return json_body({"email": email, "password": password_for(email, config.master_token)})


def cluster_config(backend: Backend) -> Response:
    return json_body({"restfulapi": f"http://{backend.spec.name}-restfulapi.dlts.emulated:5000"})


def _parse_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _team_entry(cluster: str, vc: Mapping[str, Any]) -> dict[str, Any]:
    """One VC as ``teams.js`` maps it: every metadata key is a GPU model (even ``user_quota``)."""
    metadata, quota = _parse_json(vc["metadata"]), _parse_json(vc["quota"])
    gpus: dict[str, dict[str, Any]] = {}
    for model, meta in metadata.items():
        per_node = meta.get("num_gpu_per_node") if isinstance(meta, dict) else None
        gpus[model] = {"perNode": per_node} if per_node is not None else {}
    for model, amount in quota.items():
        gpus.setdefault(model, {})["quota"] = amount
    entry: dict[str, Any] = {"id": cluster, "teamId": vc["vcName"], "admin": vc["admin"], "gpus": gpus}
    if "user_quota" in metadata:
        entry["userQuota"] = metadata["user_quota"]
    return entry


def teams(backends: list[Backend], email: str) -> Response:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for backend in backends:
        for vc in backend.list_vcs(email):
            entry = _team_entry(backend.spec.name, vc)
            grouped.setdefault(entry.pop("teamId"), []).append(entry)
    return json_body([{"id": team, "clusters": clusters} for team, clusters in grouped.items()])


def team_cluster(backend: Backend, email: str, team: str) -> Response:
    vc = backend.get_vc(email, team)
    return error(404, "Team is not found") if vc is None else json_body(flask_value(vc))


def _limit(request: Request) -> tuple[int, bool]:
    raw = request.arg("limit")
    try:
        limit = int(float(raw)) if isinstance(raw, str) and raw.strip() else 0
    except ValueError:
        limit = 0
    return limit or 10, request.arg("user") == "all"


def _by_time(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(jobs, key=lambda j: parsedate_to_datetime(j["jobTime"]).timestamp(), reverse=True)


def team_jobs(backends: list[Backend], email: str, team: str, request: Request) -> Response:
    """``team/jobs.js``: every cluster's jobs of the team, each with ``cluster`` and ``priority``, newest first."""
    limit, everyone = _limit(request)
    jobs: list[dict[str, Any]] = []
    for backend in backends:
        listing = flask_value(backend.list_jobs_v1(email, team, "all" if everyone else email, limit))
        priorities = backend.priorities()
        for category in _CATEGORIES:
            for job in listing[category]:
                job.update(cluster=backend.spec.name, priority=priorities.get(job["jobId"], 100))
                jobs.append(job)
    return json_body(_by_time(jobs))


def team_jobs_v2(backend: Backend, email: str, team: str, request: Request) -> Response:
    limit, everyone = _limit(request)
    listing = flask_value(backend.list_jobs_v2(email, team, "all" if everyone else email, limit))
    return json_body(_by_time([job for category in _CATEGORIES for job in listing[category]]))


def team_cluster_v2(backend: Backend, email: str, team: str) -> Response:
    """``v2/controllers/team/cluster.js``: the VC status regrouped by resource type, user and worker."""
    vc = backend.get_vc(email, team)
    if vc is None:
        return error(404, "Team is not found")
    body: dict[str, Any] = {
        "config": json.loads(cluster_config(backend).text()),
        "runningJobs": vc["AvaliableJobNum"],
        "types": {},
    }
    for metric, name in (
        ("capacity", "total"),
        ("unschedulable", "unschedulable"),
        ("used", "used"),
        ("preemptable_used", "preemptable"),
        ("available", "available"),
    ):
        for sku, number in vc[f"gpu_{metric}"].items():
            body["types"].setdefault(sku, {}).setdefault("gpu", {})[name] = number
    users: dict[str, Any] = {}
    for key, name in (("user_status", "used"), ("user_status_preemptable", "preemptable")):
        for row in vc[key]:
            for sku, number in row["userGPU"].items():
                types = users.setdefault(row["userName"], {"types": {}})["types"]
                types.setdefault(sku, {}).setdefault("gpu", {})[name] = number
    if users:
        body["users"] = users
    workers = {}
    for node in vc["node_status"]:
        if node["labels"].get("worker") == "active":
            status = {
                "gpu": {
                    "total": next(iter(node["gpu_capacity"].values())),
                    "allocatable": next(iter(node["gpu_allocatable"].values())),
                }
            }
            workers[node["name"]] = {
                "healthy": not node["unschedulable"],
                "ip": node["InternalIP"],
                "status": status,
            }
    if workers:
        body["workers"] = workers
    return json_body(body)


__all__ = [
    "cluster_config",
    "team_cluster",
    "team_cluster_v2",
    "team_jobs",
    "team_jobs_v2",
    "teams",
    "user",
    "version",
]
