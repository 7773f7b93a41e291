"""Per-resource behaviour of the REST storage: defaulting, validation and side effects of writes.

The generic verbs (``apiserver.py``) call a :class:`Strategy` for each write. Custom resources use their
CRD schema; pods, namespaces, services, secrets, PVCs and CRDs have the handful of rules that decide what
a client sees back (a PVC is bound at once, a CRD is established at once, a secret's ``stringData`` lands
in ``data``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import itertools
from collections.abc import Callable
from typing import Any

from . import fielderrors as fe
from . import names, podspec, schema
from .resources import ResourceType


class Strategy:
    name_check: Callable[[str], list[str]] = staticmethod(names.dns1123_subdomain)

    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Defaults and server-set fields of a new object."""

    def prepare_update(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any]) -> None:
        """Server-set fields of an updated object."""

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        return []


class CustomResourceStrategy(Strategy):
    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        self._shape(rt, obj)

    def prepare_update(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any]) -> None:
        self._shape(rt, obj)

    def _shape(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.schema is None:
            return
        pruned = schema.prune(obj, dict(rt.schema), root=True)
        obj.clear()
        obj.update(schema.apply_defaults(pruned, dict(rt.schema)))

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        if rt.schema is None:
            return []
        return schema.validate(obj, dict(rt.schema))


class PodStrategy(Strategy):
    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        podspec.default_pod(obj)

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        if old is not None:
            return podspec.validate_pod_update(obj, old)
        return podspec.validate_pod_spec(obj.get("spec") or {}, "spec")


class PodTemplateStrategy(Strategy):
    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        podspec.default_pod_spec(obj.setdefault("template", {}).setdefault("spec", {}))

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        return podspec.validate_pod_spec((obj.get("template") or {}).get("spec") or {}, "template.spec")


class NamespaceStrategy(Strategy):
    name_check = staticmethod(names.dns1123_label)

    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
            "metadata"
        ]["name"]
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}


class SecretStrategy(Strategy):
    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        obj.setdefault("type", "Opaque")
        self._fold_string_data(obj)

    def prepare_update(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any]) -> None:
        self._fold_string_data(obj)

    @staticmethod
    def _fold_string_data(obj: dict[str, Any]) -> None:
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(str(value).encode()).decode()

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        errors = []
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                errors.append(fe.invalid(f"data[{key}]", "<secret contents redacted>", "illegal base64 data"))
        return errors


class ServiceStrategy(Strategy):
    # ValidateServiceName is apimachinery's NameIsDNS1035Label (kubernetes pkg/apis/core/validation): the
    # training operator's <job>-<replicatype>-<index> services must fit in 63 characters
    name_check = staticmethod(names.dns1035_label)
    _addresses = itertools.count(10)

    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            number = next(self._addresses)
            spec["clusterIP"] = f"10.96.{number // 250}.{number % 250 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}


class PersistentVolumeClaimStrategy(Strategy):
    """Claims take the default StorageClass; the emulator binds them at once after creation."""

    def __init__(self, default_class: str) -> None:
        self.default_class = default_class

    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("storageClassName", self.default_class)
        spec.setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        spec = obj.get("spec") or {}
        errors = []
        if not spec.get("accessModes"):
            errors.append(fe.required("spec.accessModes", "at least 1 access mode is required"))
        if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
            errors.append(fe.required("spec.resources[storage]"))
        return errors


class CrdStrategy(Strategy):
    def prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {}).setdefault("finalizers", []).append(
            "customresourcecleanup.apiextensions.k8s.io"
        )
        names_ = copy.deepcopy(obj.get("spec", {}).get("names") or {})
        names_.setdefault("singular", str(names_.get("kind", "")).lower())
        names_.setdefault("listKind", f"{names_.get('kind', '')}List")
        obj["status"] = {
            "acceptedNames": names_,
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                },
            ],
            "storedVersions": [
                v["name"] for v in obj.get("spec", {}).get("versions") or [] if v.get("storage")
            ],
        }

    def validate(
        self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> list[fe.FieldError]:
        spec = obj.get("spec") or {}
        expected = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
        name = obj["metadata"].get("name")
        if name != expected:
            return [fe.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')]
        return []


def strategy_for(rt: ResourceType, extra: dict[tuple[str, str], Strategy]) -> Strategy:
    if rt.key in extra:
        return extra[rt.key]
    if rt.custom:
        return CustomResourceStrategy()
    return _BUILTIN.get(rt.key, Strategy())


_BUILTIN: dict[tuple[str, str], Strategy] = {
    ("", "pods"): PodStrategy(),
    ("", "podtemplates"): PodTemplateStrategy(),
    ("", "namespaces"): NamespaceStrategy(),
    ("", "secrets"): SecretStrategy(),
    ("", "services"): ServiceStrategy(),
    ("apiextensions.k8s.io", "customresourcedefinitions"): CrdStrategy(),
}
