"""A container's environment as the kubelet builds it.

``envFrom`` first, then ``env`` in order (``value`` with ``$(VAR)`` expanded from what came before,
``valueFrom`` with the downward API ``fieldRef``/``resourceFieldRef``, ``configMapKeyRef`` and
``secretKeyRef``), then the service variables every pod gets (``KUBERNETES_SERVICE_HOST``, ...) and
``HOSTNAME``. A missing ConfigMap or Secret (not optional) is the kubelet's ``CreateContainerConfigError``.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from .quantity import parse

Lookup = Callable[[str, str, str], "dict[str, Any] | None"]
_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


class ConfigError(Exception):
    """The container cannot be configured (``CreateContainerConfigError``); the message is the kubelet's."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` from ``env`` (unknown references stay as written), ``$$`` is a literal ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REFERENCE.sub(replace, text)


def field_value(pod: dict[str, Any], path: str) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if keyed:
        return (meta.get(keyed.group(1)) or {}).get(keyed.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(ip["ip"] for ip in status.get("podIPs") or []),
        "status.hostIPs": ",".join(ip["ip"] for ip in status.get("hostIPs") or []),
    }
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef {path!r}")
    return simple[path] or ""


def _resource_value(pod: dict[str, Any], container: dict[str, Any], ref: dict[str, Any]) -> str:
    name = ref.get("containerName") or container["name"]
    target = next((c for c in pod["spec"]["containers"] if c["name"] == name), container)
    section, _, resource = ref["resource"].partition(".")
    value = ((target.get("resources") or {}).get(section) or {}).get(resource)
    if value is None and section == "requests":
        value = ((target.get("resources") or {}).get("limits") or {}).get(resource)
    if value is None:  # unset limits read as the node's allocatable; the emulated node has 1000 of everything
        value = "1000"
    divisor = parse(ref.get("divisor") or "1")
    return str(math.ceil(parse(value) / divisor))


def _from_source(namespace: str, ref: dict[str, Any], lookup: Lookup, secret: bool) -> str | None:
    plural, what = ("secrets", "Secret") if secret else ("configmaps", "ConfigMap")
    obj = lookup(plural, namespace, ref.get("name", ""))
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{what.lower()} "{ref.get("name")}" not found')
    data = obj.get("data") or {}
    if ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f"couldn't find key {ref['key']} in {what} {namespace}/{ref.get('name')}")
    value = data[ref["key"]]
    return base64.b64decode(value).decode(errors="replace") if secret else str(value)


def _env_from(pod: dict[str, Any], container: dict[str, Any], lookup: Lookup) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        secret = "secretRef" in source
        ref = source.get("secretRef") or source.get("configMapRef") or {}
        obj = lookup("secrets" if secret else "configmaps", namespace, ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            raise ConfigError(f'{"secret" if secret else "configmap"} "{ref.get("name")}" not found')
        for key, value in (obj.get("data") or {}).items():
            text = base64.b64decode(value).decode(errors="replace") if secret else str(value)
            env[source.get("prefix", "") + key] = text
    return env


def container_env(
    pod: dict[str, Any], container: dict[str, Any], lookup: Lookup, service_env: Mapping[str, str]
) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    env = _env_from(pod, container, lookup)
    for variable in container.get("env") or []:
        source = variable.get("valueFrom")
        if source is None:
            env[variable["name"]] = expand(str(variable.get("value", "")), {**service_env, **env})
            continue
        if "fieldRef" in source:
            value: str | None = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            value = _resource_value(pod, container, source["resourceFieldRef"])
        elif "configMapKeyRef" in source:
            value = _from_source(namespace, source["configMapKeyRef"], lookup, secret=False)
        elif "secretKeyRef" in source:
            value = _from_source(namespace, source["secretKeyRef"], lookup, secret=True)
        else:
            value = None
        if value is not None:
            env[variable["name"]] = value
    for name, value in service_env.items():
        env.setdefault(name, value)
    env.setdefault("HOSTNAME", pod["spec"].get("hostname") or pod["metadata"]["name"])
    return env


def service_env(host: str, port: int) -> dict[str, str]:
    """The variables of the ``kubernetes`` service every pod gets (pointing at the emulator)."""
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": str(port),
        "KUBERNETES_PORT_443_TCP_ADDR": host,
    }
