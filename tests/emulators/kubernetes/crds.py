"""The CustomResourceDefinitions the three operators install, written from their upstream definitions.

- ``tfjobs`` / ``pytorchjobs`` (``kubeflow.org/v1``): the controller-gen CRDs of training-operator v1.9.0 with
  the pod template left open (upstream spells out the whole PodTemplateSpec; pod fields are checked when the
  operator creates the pods instead); ``runPolicy.suspend`` defaults to false; status subresource.
- ``frameworks`` (``frameworkcontroller.microsoft.com/v1``): ``BuildFrameworkCRD`` (names
  ``^[a-z0-9]{1,63}$``, executionType enum, retry and completion-policy minimums); no status subresource.
- ``adaptdljobs`` (``adaptdl.petuum.com/v1``): the helm chart's CRD (name maxLength 63, ``spec.template``
  required, min/max replicas minimums); status subresource.
"""

from __future__ import annotations

from typing import Any

OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
INT = {"type": "integer"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}

_CONDITION = {
    "type": "object",
    "required": ["status", "type"],
    "properties": {
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "lastUpdateTime": {"type": "string", "format": "date-time"},
        "message": STR,
        "reason": STR,
        "status": STR,
        "type": STR,
    },
}
_REPLICA_STATUS = {
    "type": "object",
    "properties": {
        "active": INT,
        "failed": INT,
        "succeeded": INT,
        "selector": STR,
        "labelSelector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
_JOB_STATUS = {
    "type": "object",
    "properties": {
        "completionTime": STR,
        "conditions": {"type": "array", "items": _CONDITION},
        "lastReconcileTime": STR,
        "replicaStatuses": {"type": "object", "additionalProperties": _REPLICA_STATUS},
        "startTime": STR,
    },
}
_RUN_POLICY = {
    "type": "object",
    "properties": {
        "activeDeadlineSeconds": INT,
        "backoffLimit": INT,
        "cleanPodPolicy": STR,
        "managedBy": STR,
        "schedulingPolicy": OPEN,
        "suspend": {"type": "boolean", "default": False},
        "ttlSecondsAfterFinished": INT,
    },
}
_REPLICA_SPEC = {
    "type": "object",
    "properties": {"replicas": INT, "restartPolicy": STR, "template": OPEN},
}


def _definition(
    group: str,
    kind: str,
    plural: str,
    schema: dict[str, Any],
    *,
    status_subresource: bool,
    printer: list[dict[str, Any]] | None = None,
    short_names: list[str] | None = None,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    if printer:
        version["additionalPrinterColumns"] = printer
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def _kubeflow(kind: str, plural: str, replica_field: str, extra: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "type": "object",
        "required": [replica_field],
        "properties": {
            "runPolicy": _RUN_POLICY,
            replica_field: {"type": "object", "additionalProperties": _REPLICA_SPEC},
            **extra,
        },
    }
    schema = {"type": "object", "properties": {"spec": spec, "status": _JOB_STATUS}}
    printer = [
        {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ]
    return _definition("kubeflow.org", kind, plural, schema, status_subresource=True, printer=printer)


def tfjobs() -> dict[str, Any]:
    return _kubeflow("TFJob", "tfjobs", "tfReplicaSpecs", {"successPolicy": STR, "enableDynamicWorker": BOOL})


_ELASTIC = {
    "type": "object",
    "properties": {
        "maxReplicas": INT,
        "minReplicas": INT,
        "maxRestarts": INT,
        "nProcPerNode": INT,
        "rdzvBackend": STR,
        "rdzvConf": {"type": "array", "items": {"type": "object", "properties": {"key": STR, "value": STR}}},
        "rdzvHost": STR,
        "rdzvId": STR,
        "rdzvPort": INT,
        "standalone": BOOL,
        "metrics": {"type": "array", "items": OPEN},
    },
}


def pytorchjobs() -> dict[str, Any]:
    return _kubeflow(
        "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", {"elasticPolicy": _ELASTIC, "nprocPerNode": STR}
    )


FC_NAME = "^[a-z0-9]{1,63}$"
_FC_RETRY = {
    "type": "object",
    "properties": {"maxRetryCount": {"type": "integer", "minimum": -2}, "fancyRetryPolicy": BOOL},
}
_FC_TASK_ROLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": FC_NAME},
        "taskNumber": {"type": "integer", "minimum": 0, "maximum": 10000},
        "frameworkAttemptCompletionPolicy": {
            "type": "object",
            "properties": {
                "minFailedTaskCount": {"type": "integer", "minimum": -1},
                "minSucceededTaskCount": {"type": "integer", "minimum": -1},
            },
        },
        "task": {
            "type": "object",
            "properties": {
                "retryPolicy": _FC_RETRY,
                "podGracefulDeletionTimeoutSec": {"type": "integer", "nullable": True},
                "pod": OPEN,
            },
        },
    },
}


def frameworks() -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "pattern": FC_NAME}}},
            "spec": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "nullable": True},
                    "executionType": {"type": "string", "enum": ["Create", "Start", "Stop"]},
                    "retryPolicy": _FC_RETRY,
                    "taskRoles": {"type": "array", "items": _FC_TASK_ROLE},
                },
            },
            "status": {"type": "object", "nullable": True, "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return _definition(
        "frameworkcontroller.microsoft.com", "Framework", "frameworks", schema, status_subresource=False
    )


def adaptdljobs() -> dict[str, Any]:
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
            "spec": {
                "type": "object",
                "required": ["template"],
                "properties": {
                    "maxReplicas": {"type": "integer", "minimum": 1},
                    "minReplicas": {"type": "integer", "minimum": 0},
                    "preemptible": BOOL,
                    "template": OPEN,
                },
            },
            "status": OPEN,
        },
    }
    printer = [
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Replicas", "type": "string", "jsonPath": ".status.replicas"},
        {"name": "Restarts", "type": "integer", "jsonPath": ".status.group"},
        {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return _definition(
        "adaptdl.petuum.com",
        "AdaptDLJob",
        "adaptdljobs",
        schema,
        status_subresource=True,
        printer=printer,
        short_names=["adljob", "adljobs"],
    )
