"""API paths: ``/api/v1/...`` and ``/apis/{group}/{version}/...`` split into what they address."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str | None = None  # None: cluster scope (or all namespaces)
    name: str | None = None
    subresource: str | None = None


@dataclass(frozen=True)
class DiscoveryPath:
    group: str | None  # None: the list of groups (/apis) or of core versions (/api)
    version: str | None
    core: bool


def parse(path: str) -> ResourcePath | DiscoveryPath | None:
    parts = [part for part in path.split("/") if part]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    if parts[0] == "api":
        if len(parts) == 1:
            return DiscoveryPath(None, None, core=True)
        return _under("", parts[1], parts[2:], core=True)
    if len(parts) == 1:
        return DiscoveryPath(None, None, core=False)
    if len(parts) == 2:
        return DiscoveryPath(parts[1], None, core=False)
    return _under(parts[1], parts[2], parts[3:], core=False)


def _under(group: str, version: str, rest: list[str], *, core: bool) -> ResourcePath | DiscoveryPath | None:
    if not rest:
        return DiscoveryPath(group, version, core=core)
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        return ResourcePath(group, version, rest[0], namespace, *rest[1:])
    if len(rest) > 3:
        return None
    return ResourcePath(group, version, rest[0], None, *rest[1:])
