"""Job endpoints: ``/endpoints`` of the RestAPI and the endpoint manager that exposes them.

An endpoint is requested as ``"ssh"``/``"ipython"``/``"tensorboard"`` or ``{"name", "podPort"}`` (podPort in
40000-49999, name at most 16 characters), stored ``pending``, and turned ``running`` by the endpoint manager
once the job runs: first it creates a NodePort service, on its next pass it records the service's port and the
pod's node. When the job stops running, running endpoints become ``stopped``; a relaunch makes them ``pending``.

Only ``{"name", "podPort"}`` endpoints are served (a loopback port relaying to the job's ``podPort``); ssh,
Jupyter and TensorBoard need a server started inside the pod, so those stay ``pending`` here.
"""

from __future__ import annotations

from typing import Any

from tests.emulators.dlts.config import alias_of
from tests.emulators.dlts.forwarder import Forwarder
from tests.emulators.dlts.jobs import Job, can_expose

BUILTIN = ("ssh", "ipython", "tensorboard")
NODE_NAME = "localhost"  # the node every pod of the emulator runs on


def check_request(requested: list[Any]) -> str | None:
    """The ``Endpoint.post`` checks before the database: a 400 message, or None."""
    for port in (e for e in requested if e not in BUILTIN):
        if any(field not in port for field in ("name", "podPort")):
            return f'Bad request, interactive port should have "name" and "podPort"]: {requested!r}'
        if not 40000 <= int(port["podPort"]) <= 49999:
            return f"Bad request, interactive podPort should in range 40000-49999: {requested!r}"
        if len(port["name"]) > 16:
            return f"Bad request, interactive port name length shoule be less than 16: {requested!r}"
    return None


def _pod_names(job: Job) -> list[str]:
    params = job.params
    if params["jobtrainingtype"] == "RegularJob":
        return [job.job_id]
    counts = {"ps": int(params["numps"]), "worker": int(params["numpsworker"])}
    return [f"{job.job_id}-{role}{i}" for role in ("ps", "worker") for i in range(counts[role])]


def _new_endpoint(job: Job, endpoint_id: str, pod: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": endpoint_id,
        "jobId": job.job_id,
        "podName": pod,
        "username": alias_of(job.user_name),
        "name": name,
        **extra,
        "status": "pending",
        "hostNetwork": job.params.get("hostNetwork") is True,
    }


def update_endpoints(job: Job, requested: list[Any]) -> dict[str, dict[str, Any]]:
    """``UpdateEndpoints`` for a job the caller may expose: adds the endpoints not there yet, returns all."""
    pods = _pod_names(job)
    main = pods[0] if job.params["jobtrainingtype"] == "RegularJob" else pods[1]
    endpoints = dict(job.endpoints or {})
    wanted: list[tuple[str, str, str, dict[str, Any]]] = []
    if "ssh" in requested:
        wanted += [(f"e-{pod}-ssh", pod, "ssh", {}) for pod in pods]
    for name in ("ipython", "tensorboard"):
        if name in requested:
            wanted.append((f"e-{job.job_id}-{name}", main, name, {}))
    for port in (e for e in requested if e not in BUILTIN):
        extra = {"podPort": port["podPort"]}
        wanted.append((f"e-{job.job_id}-port-{port['podPort']}", main, port["name"], extra))
    for endpoint_id, pod, name, extra in wanted:
        if endpoint_id not in endpoints:
            endpoints[endpoint_id] = _new_endpoint(job, endpoint_id, pod, name, **extra)
    job.endpoints = endpoints
    return endpoints


def list_endpoints(job: Job | None, email: str, config: Any, domain: str) -> list[dict[str, Any]]:
    """``GetEndpoints``: ``[]`` for an unknown job or one the user may not expose."""
    if job is None or not can_expose(config, email, job):
        return []
    items = []
    for endpoint in (job.endpoints or {}).values():
        item = {key: endpoint[key] for key in ("id", "name", "username", "status", "hostNetwork", "podName")}
        item["domain"] = domain
        if "podPort" in endpoint:
            item["podPort"] = endpoint["podPort"]
        if endpoint["status"] == "running":
            item["port"] = int(endpoint["port"])
            if "nodeName" in endpoint:
                item["nodeName"] = endpoint["nodeName"]
        items.append(item)
    return items


def reset_endpoints(job: Job) -> None:
    """Before a (re)launch every endpoint goes back to ``pending``."""
    for endpoint in (job.endpoints or {}).values():
        endpoint["status"] = "pending"


def advance_endpoints(job: Job) -> None:
    """One pass of the endpoint manager over a job's endpoints."""
    pod = job.run
    for endpoint_id, endpoint in (job.endpoints or {}).items():
        if job.status != "running" or pod is None:
            if endpoint["status"] != "pending":
                endpoint["status"] = "stopped"
            continue
        if endpoint["status"] != "pending" or endpoint["name"] in BUILTIN:
            continue  # ssh/ipython/tensorboard need a server set up in the pod, which is not emulated
        if endpoint["hostNetwork"]:
            endpoint.update(status="running", port=int(endpoint["podPort"]), nodeName=NODE_NAME)
        elif endpoint_id not in pod.services:
            pod.services[endpoint_id] = Forwarder(int(endpoint["podPort"]))
        else:
            endpoint.update(status="running", port=pod.services[endpoint_id].port, nodeName=NODE_NAME)


__all__ = [
    "BUILTIN",
    "NODE_NAME",
    "advance_endpoints",
    "check_request",
    "list_endpoints",
    "reset_endpoints",
    "update_endpoints",
]
