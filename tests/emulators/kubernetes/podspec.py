"""Pods as the API server admits them: defaulting and the validation rules clients run into.

Defaults are those a created pod shows (``restartPolicy: Always``, ``dnsPolicy``, ``schedulerName``, the
service account, container ``terminationMessagePath``/``imagePullPolicy``, the not-ready/unreachable
tolerations, ``status.phase: Pending``, ``qosClass``). Validation covers what ``ValidatePodSpec`` checks on
the fields trialfleet-like clients fill: containers, names, images, restart policy, volumes and their one
source, volume mounts, environment names, ports; and the pod-update immutability rule.
"""

from __future__ import annotations

import copy
from typing import Any

from . import fielderrors as fe
from . import names
from .quantity import parse

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
)
_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _pull_policy(image: str) -> str:
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "IfNotPresent"
    tag = name.split(":", 1)[1] if ":" in name else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def default_container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", _pull_policy(container.get("image") or ""))
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        default_container(container)
    for volume in spec.get("volumes") or []:
        for source in ("configMap", "secret"):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)


def default_pod(pod: dict[str, Any]) -> None:
    """Defaulting plus what the default admission plugins add to a new pod."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for default in _TOLERATIONS:
        if not any(t.get("key") == default["key"] for t in tolerations):
            tolerations.append(copy.deepcopy(default))
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def qos_class(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        (r.get("limits") or {}).get(name) is not None
        and (r.get("requests") or r.get("limits") or {}).get(name) == (r.get("limits") or {}).get(name)
        for r in resources
        for name in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def validate_pod_spec(spec: dict[str, Any], at: str) -> list[fe.FieldError]:
    errors: list[fe.FieldError] = []
    volumes, volume_errors = _validate_volumes(spec.get("volumes") or [], fe.path(at, "volumes"))
    errors += volume_errors
    containers = spec.get("containers") or []
    if not containers:
        errors.append(fe.required(fe.path(at, "containers")))
    seen: set[str] = set()
    for field_name in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field_name) or []):
            errors += _validate_container(container, fe.path(at, field_name, index), volumes, seen)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        errors.append(fe.not_supported(fe.path(at, "restartPolicy"), policy, RESTART_POLICIES))
    # ValidatePodSpec (kubernetes pkg/apis/core/validation/validation.go): a hostname or subdomain the pod sets
    # is a DNS-1123 label, at most 63 characters (AdaptDL sets the hostname <job>-<group>-<rank>)
    for field_name in ("hostname", "subdomain"):
        if value := spec.get(field_name):
            errors += [fe.invalid(fe.path(at, field_name), value, m) for m in names.dns1123_label(value)]
    return errors


def _validate_volumes(volumes: list[dict[str, Any]], at: str) -> tuple[set[str], list[fe.FieldError]]:
    errors: list[fe.FieldError] = []
    known: set[str] = set()
    for index, volume in enumerate(volumes):
        here = fe.path(at, index)
        name = volume.get("name") or ""
        if not name:
            errors.append(fe.required(fe.path(here, "name")))
        else:
            errors += [fe.invalid(fe.path(here, "name"), name, m) for m in names.dns1123_label(name)]
            if name in known:
                errors.append(fe.duplicate(fe.path(here, "name"), name))
        known.add(name)
        sources = [source for source in VOLUME_SOURCES if source in volume]
        if not sources:
            errors.append(fe.required(here, "must specify a volume type"))
        elif len(sources) > 1:
            errors.append(fe.forbidden(fe.path(here, sources[1]), "may not specify more than 1 volume type"))
        else:
            errors += _validate_source(sources[0], volume[sources[0]] or {}, fe.path(here, sources[0]))
    return known, errors


def _validate_source(kind: str, source: dict[str, Any], at: str) -> list[fe.FieldError]:
    required = {
        "nfs": ("server", "path"),
        "azureFile": ("secretName", "shareName"),
        "persistentVolumeClaim": ("claimName",),
        "hostPath": ("path",),
        "secret": (),
    }.get(kind, ())
    errors = [fe.required(fe.path(at, name)) for name in required if not source.get(name)]
    if kind == "nfs" and source.get("path") and not str(source["path"]).startswith("/"):
        errors.append(fe.invalid(fe.path(at, "path"), source["path"], "must be an absolute path"))
    return errors


def _validate_container(container: dict[str, Any], at: str, volumes: set[str], seen: set[str]) -> list:
    errors: list[fe.FieldError] = []
    name = container.get("name") or ""
    if not name:
        errors.append(fe.required(fe.path(at, "name")))
    else:
        errors += [fe.invalid(fe.path(at, "name"), name, m) for m in names.dns1123_label(name)]
        if name in seen:
            errors.append(fe.duplicate(fe.path(at, "name"), name))
        seen.add(name)
    if not container.get("image"):
        errors.append(fe.required(fe.path(at, "image")))
    mounts: set[str] = set()
    for index, mount in enumerate(container.get("volumeMounts") or []):
        here = fe.path(at, "volumeMounts", index)
        if mount.get("name") not in volumes:
            errors.append(fe.not_found(fe.path(here, "name"), mount.get("name", "")))
        if not mount.get("mountPath"):
            errors.append(fe.required(fe.path(here, "mountPath")))
        elif mount["mountPath"] in mounts:
            errors.append(fe.invalid(fe.path(here, "mountPath"), mount["mountPath"], "must be unique"))
        mounts.add(mount.get("mountPath", ""))
    errors += _validate_env(container.get("env") or [], fe.path(at, "env"))
    errors += _validate_ports(container.get("ports") or [], fe.path(at, "ports"))
    errors += _validate_resources(container.get("resources") or {}, fe.path(at, "resources"))
    return errors


def _validate_env(env: list[dict[str, Any]], at: str) -> list[fe.FieldError]:
    errors: list[fe.FieldError] = []
    for index, variable in enumerate(env):
        name = variable.get("name") or ""
        if not name:
            errors.append(fe.required(fe.path(at, index, "name")))
        else:
            errors += [fe.invalid(fe.path(at, index, "name"), name, m) for m in names.env_var_name(name)]
        if variable.get("value") and variable.get("valueFrom"):
            errors.append(
                fe.invalid(
                    fe.path(at, index, "valueFrom"), "", "may not be specified when `value` is not empty"
                )
            )
    return errors


def _validate_ports(ports: list[dict[str, Any]], at: str) -> list[fe.FieldError]:
    errors = []
    for index, port in enumerate(ports):
        number = port.get("containerPort")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            errors.append(
                fe.invalid(
                    fe.path(at, index, "containerPort"), number, "must be between 1 and 65535, inclusive"
                )
            )
    return errors


def _validate_resources(resources: dict[str, Any], at: str) -> list[fe.FieldError]:
    errors = []
    for section in ("limits", "requests"):
        for name, value in (resources.get(section) or {}).items():
            try:
                parse(value)
            except ValueError:
                errors.append(
                    fe.invalid(fe.path(at, section, fe.key(name)), value, "must be a valid quantity")
                )
    return errors


_MUTABLE_ON_UPDATE = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[fe.FieldError]:
    def masked(spec: dict[str, Any]) -> dict[str, Any]:
        spec = copy.deepcopy(spec)
        for field_name in ("containers", "initContainers"):
            for container in spec.get(field_name) or []:
                container.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("terminationGracePeriodSeconds", None)
        return spec

    if masked(new.get("spec") or {}) != masked(old.get("spec") or {}):
        return [fe.forbidden("spec", f"pod updates may not change fields other than {_MUTABLE_ON_UPDATE}")]
    return []
