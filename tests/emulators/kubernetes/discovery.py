"""Discovery documents (``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/{g}/{v}``).

The official Python client's typed APIs never ask for them, but ``kubectl`` and the dynamic client do.
"""

from __future__ import annotations

from typing import Any

from .resources import Registry, ResourceType

VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-trialfleet-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def core_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{version}", "version": version} for version in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(name, versions) for name, versions in registry.group_versions().items() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    entries = [main]
    if rt.status_subresource:
        entries.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    for sub in rt.subresources:
        entries.append(
            {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get"],
            }
        )
    return entries


def resource_list(registry: Registry, group_name: str, version: str) -> dict[str, Any] | None:
    types = list(registry.in_group_version(group_name, version))
    if not types:
        return None
    group_version = f"{group_name}/{version}" if group_name else version
    resources = [entry for rt in types for entry in _entries(rt)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
