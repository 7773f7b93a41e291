"""TFJob and PyTorchJob specs: the operator's defaulting, its validating webhooks and the pods' environment.

From training-operator v1.9.0: ``*_defaults.go`` (replica keys in camel case, replicas 1, restart policy
``Never`` for TF and ``OnFailure`` for PyTorch, the default port, ``cleanPodPolicy: None``,
``nprocPerNode: auto``), ``pkg/webhooks/{tensorflow,pytorch}`` (a refusal is a plain error, so the API server
answers 403 ``admission webhook "validator.<kind>.training-operator.kubeflow.org" denied the request: ...``),
``tensorflow.go`` (``TF_CONFIG``) and ``pytorch/envvar.go`` (``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE``, ``PET_*``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from . import fielderrors as fe
from . import names

MANAGERS = ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]


@dataclass(frozen=True)
class JobKind:
    kind: str
    plural: str
    replica_field: str
    container: str
    port_name: str
    port: int
    restart_policy: str
    replica_types: tuple[str, ...]  # the camel-case names defaulting knows, in the operator's status order
    controller: str

    @property
    def webhook(self) -> str:
        return f"validator.{self.kind.lower()}.training-operator.kubeflow.org"


TFJOB = JobKind(
    "TFJob",
    "tfjobs",
    "tfReplicaSpecs",
    "tensorflow",
    "tfjob-port",
    2222,
    "Never",
    ("Chief", "Evaluator", "Master", "PS", "Worker"),
    "tfjob-controller",
)
PYTORCHJOB = JobKind(
    "PyTorchJob",
    "pytorchjobs",
    "pytorchReplicaSpecs",
    "pytorch",
    "pytorchjob-port",
    23456,
    "OnFailure",
    ("Master", "Worker"),
    "pytorchjob-controller",
)


def defaulted(kind: JobKind, spec: dict[str, Any]) -> dict[str, Any]:
    """``Scheme.Default(job)``: applied in the controller's memory, never written back."""
    spec = copy.deepcopy(spec)
    run_policy = spec.setdefault("runPolicy", {})
    run_policy.setdefault("cleanPodPolicy", "None")
    replicas = spec.get(kind.replica_field) or {}
    for camel in kind.replica_types:
        for key in list(replicas):
            if key.lower() == camel.lower() and key != camel:
                replicas[camel] = replicas.pop(key)
                break
    for replica in replicas.values():
        replica.setdefault("replicas", 1)
        replica.setdefault("restartPolicy", kind.restart_policy)
        containers = replica.setdefault("template", {}).setdefault("spec", {}).setdefault("containers", [])
        main = next(
            (c for c in containers if c.get("name") == kind.container), containers[0] if containers else None
        )
        if main is not None and not any(p.get("name") == kind.port_name for p in main.get("ports") or []):
            main.setdefault("ports", []).append({"name": kind.port_name, "containerPort": kind.port})
    spec[kind.replica_field] = replicas
    if kind is TFJOB:
        spec.setdefault("successPolicy", "")
    else:
        _default_pytorch(spec)
    return spec


def _default_pytorch(spec: dict[str, Any]) -> None:
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        if elastic.get("maxReplicas") is None and elastic.get("minReplicas") is not None:
            elastic["maxReplicas"] = elastic["minReplicas"]
        elif elastic.get("minReplicas") is None and elastic.get("maxReplicas") is not None:
            elastic["minReplicas"] = elastic["maxReplicas"]
        elif elastic.get("minReplicas") is None:
            workers = (spec["pytorchReplicaSpecs"].get("Worker") or {}).get("replicas")
            elastic["minReplicas"] = elastic["maxReplicas"] = workers
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = "auto"


# ---- the validating webhooks ------------------------------------------------------------------------------


def validate(kind: JobKind, job: dict[str, Any], old: dict[str, Any] | None) -> list[fe.FieldError]:
    errors: list[fe.FieldError] = []
    name = job["metadata"].get("name", "")
    problems = names.dns1035_label(name)
    if problems:
        errors.append(fe.invalid("metadata.name", name, f"should match: {','.join(problems)}"))
    spec = job.get("spec") or {}
    manager = (spec.get("runPolicy") or {}).get("managedBy")
    if old is not None and manager != ((old.get("spec") or {}).get("runPolicy") or {}).get("managedBy"):
        errors.append(fe.invalid("spec.runPolicy.managedBy", manager, "field is immutable"))
    if manager is not None and manager not in MANAGERS:
        errors.append(fe.not_supported("spec.runPolicy.managedBy", manager, MANAGERS))
    if kind is PYTORCHJOB:
        errors += _pytorch_spec(spec)
    errors += _replica_specs(kind, spec.get(kind.replica_field))
    return errors


def _pytorch_spec(spec: dict[str, Any]) -> list[fe.FieldError]:
    errors = []
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        if "Worker" not in (spec.get("pytorchReplicaSpecs") or {}):
            errors.append(
                fe.required(
                    "spec.pytorchReplicaSpecs[Worker]", "must be configured if elastic policy is used"
                )
            )
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errors.append(
                fe.forbidden("spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode")
            )
    return errors


def _replica_specs(kind: JobKind, replicas: dict[str, Any] | None) -> list[fe.FieldError]:
    at = f"spec.{kind.replica_field}"
    if replicas is None:
        return [fe.required(at, "must be required")]
    errors: list[fe.FieldError] = []
    chief_or_master = 0
    for rtype, rspec in replicas.items():
        role = f"{at}[{rtype}]"
        containers_path = f"{role}.template.spec.containers"
        if kind is PYTORCHJOB and rtype not in ("Master", "Worker"):
            errors.append(fe.not_supported(role, rtype, ["Master", "Worker"]))
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            errors.append(fe.required(containers_path, "must be specified"))
        chief_or_master += rtype in ("Chief", "Master")
        for index, container in enumerate(containers):
            if not container.get("image"):
                errors.append(fe.required(f"{containers_path}[{index}].image", "must be required"))
        if not any(c.get("name") == kind.container for c in containers):
            errors.append(
                fe.required(containers_path, f"must have at least one container with name {kind.container}")
            )
        if kind is PYTORCHJOB:
            count = (rspec or {}).get("replicas")
            if rtype == "Master" and count != 1:
                errors.append(fe.forbidden(f"{role}.replicas", "must be 1"))
            elif rtype != "Master" and count is not None and count < 1:
                errors.append(fe.forbidden(f"{role}.replicas", "must be at least 1"))
    if kind is TFJOB and chief_or_master > 1:
        errors.append(fe.forbidden(at, "must not have more than 1 Chief or Master role"))
    return errors


# ---- environment of the pods ------------------------------------------------------------------------------


def _port(kind: JobKind, spec: dict[str, Any], rtype: str) -> int:
    containers = spec[kind.replica_field][rtype]["template"]["spec"]["containers"]
    for container in containers:
        if container.get("name") == kind.container:
            for port in container.get("ports") or []:
                if port.get("name") == kind.port_name:
                    return int(port["containerPort"])
    return -1


def tf_config(job: dict[str, Any], spec: dict[str, Any], rtype: str, index: int) -> str | None:
    replicas = spec["tfReplicaSpecs"]
    if sum(r.get("replicas", 1) for r in replicas.values()) == 1:
        return None  # not distributed: no TF_CONFIG
    meta = job["metadata"]
    cluster = {}
    for name, replica in sorted(replicas.items(), key=lambda item: item[0].lower()):
        port = _port(TFJOB, spec, name)
        cluster[name.lower()] = [
            f"{meta['name']}-{name.lower()}-{i}.{meta['namespace']}.svc:{port}"
            for i in range(replica.get("replicas", 1))
        ]
    task = {"type": rtype.lower(), "index": index}
    if spec.get("enableDynamicWorker"):
        sparse: dict[str, Any] = {"worker": {}, "ps": []}
        if rtype.lower() == "ps":
            sparse["ps"] = [cluster["ps"][index]]
        elif rtype.lower() == "worker":
            sparse["ps"] = cluster.get("ps", [])
            sparse["worker"] = {str(index): cluster["worker"][index]}
        return json.dumps({"cluster": sparse, "task": task}, separators=(",", ":"))
    return json.dumps({"cluster": cluster, "task": task, "environment": "cloud"}, separators=(",", ":"))


def pytorch_env(job: dict[str, Any], spec: dict[str, Any], rtype: str, index: int) -> list[dict[str, str]]:
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(r.get("replicas", 1) for r in replicas.values())
    try:
        nproc = int(spec.get("nprocPerNode") or 1)
    except ValueError:
        nproc = 1
    env = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    if "Master" in replicas:
        port = str(_port(PYTORCHJOB, spec, "Master"))
        address = f"{job['metadata']['name']}-master-0"
        rank = index + 1 if rtype == "Worker" else index
        env += [
            {"name": "MASTER_PORT", "value": port},
            {"name": "PET_MASTER_PORT", "value": port},
            {"name": "MASTER_ADDR", "value": address},
            {"name": "PET_MASTER_ADDR", "value": address},
            {"name": "WORLD_SIZE", "value": str(total * nproc)},
            {"name": "RANK", "value": str(rank)},
            {"name": "PET_NODE_RANK", "value": str(rank)},
        ]
    if spec.get("nprocPerNode") is not None:
        env.append({"name": "PET_NPROC_PER_NODE", "value": str(spec["nprocPerNode"])})
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        env.append({"name": "PET_NNODES", "value": str(total)})
    else:
        env.append(
            {"name": "PET_NNODES", "value": f"{elastic.get('minReplicas')}:{elastic.get('maxReplicas')}"}
        )
        env.append({"name": "PET_RDZV_BACKEND", "value": elastic.get("rdzvBackend") or "c10d"})
    return env
