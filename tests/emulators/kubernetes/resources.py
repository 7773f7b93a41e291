"""The resource types the emulated API server serves: built-in core types and types defined by CRDs.

A :class:`ResourceType` carries what the generic REST machinery needs to know about a resource: where it is
served (group, version, plural), its kind, scope, subresources, which field selectors it supports and
whether DELETE answers with the deleted object (pods, services) or with a ``Status`` (custom resources).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .query_selectors import COMMON_FIELDS, EVENT_FIELDS, POD_FIELDS, SECRET_FIELDS, FieldGetter


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    returns_deleted_object: bool = False
    unconditional_update: bool = False
    custom: bool = False
    subresources: tuple[str, ...] = ()
    fields: Mapping[str, FieldGetter] = field(default_factory=lambda: COMMON_FIELDS)
    schema: Mapping[str, Any] | None = None
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _core(plural: str, kind: str, **options: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, singular=kind.lower(), **options)


BUILTIN: tuple[ResourceType, ...] = (
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        status_subresource=True,
        returns_deleted_object=True,
        short_names=("ns",),
        subresources=("finalize",),
    ),
    _core(
        "pods",
        "Pod",
        status_subresource=True,
        returns_deleted_object=True,
        fields=POD_FIELDS,
        short_names=("po",),
        subresources=("log",),
    ),
    _core("secrets", "Secret", unconditional_update=True, fields=SECRET_FIELDS),
    _core("configmaps", "ConfigMap", unconditional_update=True, short_names=("cm",)),
    _core("services", "Service", status_subresource=True, returns_deleted_object=True, short_names=("svc",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", status_subresource=True, short_names=("pvc",)),
    _core(
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        status_subresource=True,
        short_names=("pv",),
    ),
    _core("events", "Event", fields=EVENT_FIELDS, short_names=("ev",)),
    _core("nodes", "Node", namespaced=False, status_subresource=True, short_names=("no",)),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _core("podtemplates", "PodTemplate"),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        singular="deployment",
        status_subresource=True,
        short_names=("deploy",),
    ),
    ResourceType(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        namespaced=False,
        singular="storageclass",
        short_names=("sc",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        singular="customresourcedefinition",
        status_subresource=True,
        short_names=("crd", "crds"),
    ),
)

CRD_TYPE = BUILTIN[-1]
NAMESPACE_TYPE = BUILTIN[0]
POD_TYPE = BUILTIN[1]


def from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The served versions of a CRD as resource types."""
    spec = crd["spec"]
    names = spec["names"]
    types = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        types.append(
            ResourceType(
                spec["group"],
                version["name"],
                names["plural"],
                names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames") or ()),
                status_subresource="status" in subresources,
                custom=True,
                schema=schema,
            )
        )
    return types


class Registry:
    """Built-in types plus the types of the CRDs currently established."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._custom: dict[str, list[ResourceType]] = {}  # CRD name → its served versions

    def set_crd(self, crd: Mapping[str, Any]) -> None:
        with self._lock:
            self._custom[crd["metadata"]["name"]] = from_crd(crd)

    def drop_crd(self, name: str) -> None:
        with self._lock:
            self._custom.pop(name, None)

    def all(self) -> list[ResourceType]:
        with self._lock:
            custom = [rt for types in self._custom.values() for rt in types]
        return [*BUILTIN, *custom]

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rt in self.all():
            if rt.group == group and rt.version == version and rt.plural == plural:
                return rt
        return None

    def by_key(self, group: str, plural: str) -> ResourceType | None:
        return next((rt for rt in self.all() if rt.key == (group, plural)), None)

    def group_versions(self) -> dict[str, list[str]]:
        versions: dict[str, list[str]] = {}
        for rt in self.all():
            known = versions.setdefault(rt.group, [])
            if rt.version not in known:
                known.append(rt.version)
        return versions

    def in_group_version(self, group: str, version: str) -> Iterable[ResourceType]:
        return [rt for rt in self.all() if rt.group == group and rt.version == version]
