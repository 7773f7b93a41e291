"""The ``/_emu/...`` control API, for tests that drive the emulator from another process.

=========================================================  ====================================================
``GET /_emu/state``                                        resourceVersion, object counts, operators, errors
``GET /_emu/requests?since=N`` / ``DELETE /_emu/requests``  the request log / clear it
``POST /_emu/clock/advance`` ``{"seconds": s}``             move a manual clock
``POST /_emu/faults/fail`` ``{"count","code","method","path","retryAfter"}``  transient errors
``POST /_emu/faults/deny`` ``{"resource","verb","group","namespace"}``  RBAC 403 (``DELETE``: allow all)
``POST /_emu/faults/lag-reads`` ``{"reads": n}``            404 on the next reads of new objects
``POST /_emu/watches/expire-next`` ``{"count": n}``         410 on the next watches (``"plural"``: of one kind)
``POST /_emu/watches/drop-next`` ``{"afterEvents": n}``     cut the next watch after n events
``POST /_emu/watches/drop``                                 cut every open watch
``POST /_emu/watches/compact``                              forget history: older versions get 410
``POST /_emu/token`` ``{"token": t}``                       accept another token (401 for the old one)
``POST|DELETE /_emu/operators/{name}``                      install / uninstall an operator
``POST /_emu/controllers/{name}/restart``                   restart a controller
``POST /_emu/nodes/{name}/lose``                            lose a node
``POST /_emu/pods/{ns}/{name}/oom`` ``{"container": c}``    OOM-kill a container
``POST|DELETE /_emu/images/fail`` ``{"pattern": p}``        failing image pulls / heal them
``POST|DELETE /_emu/scheduling/block`` ``{"message": m}``   keep pods Pending / release
``POST /_emu/adaptdl/{ns}/{name}/allocation`` ``{"allocation": [...]}``  AdaptDL re-allocation
``GET /_emu/adaptdl-supervisor/discover/{ns}/{name}/{group}``  the AdaptDL supervisor's pod IP discovery
``PUT /_emu/adaptdl-supervisor/hints/{ns}/{name}``         the AdaptDL supervisor's hint report
=========================================================  ====================================================
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import errors as err

if TYPE_CHECKING:
    from .cluster import KubernetesEmulator

Answer = tuple[int, Any]
Route = Callable[["KubernetesEmulator", "re.Match[str]", dict[str, str], Any], Answer]
_ROUTES: list[tuple[str, re.Pattern[str], Route]] = []


def route(method: str, pattern: str) -> Callable[[Route], Route]:
    def register(function: Route) -> Route:
        _ROUTES.append((method, re.compile(f"^/_emu{pattern}$"), function))
        return function

    return register


class Control:
    def __init__(self, emulator: KubernetesEmulator) -> None:
        self.emulator = emulator

    def __call__(self, method: str, path: str, query: dict[str, str], body: Any) -> Answer:
        for wanted, pattern, function in _ROUTES:
            match = pattern.match(path)
            if match and wanted == method:
                try:
                    return function(self.emulator, match, query, body or {})
                except (KeyError, ValueError, TypeError) as error:
                    return 400, {"error": f"{type(error).__name__}: {error}"}
        return 404, {"error": f"no control route {method} {path}"}


OK: Answer = (200, {"ok": True})


@route("GET", "/state")
def _state(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    counts: dict[str, int] = {}
    for key, _ in emu.store.all_objects():
        name = f"{key[1]}.{key[0]}" if key[0] else key[1]
        counts[name] = counts.get(name, 0) + 1
    return 200, {
        "resourceVersion": str(emu.store.rv),
        "objects": counts,
        "operators": sorted(emu.operators),
        "now": emu.clock.now(),
        "errors": emu.errors(),
    }


@route("GET", "/requests")
def _requests(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    since = int(query.get("since", "0"))
    return 200, {"items": [r.to_json() for r in emu.requests.since(since)], "next": len(emu.requests)}


@route("DELETE", "/requests")
def _clear(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.requests.clear()
    return OK


@route("POST", "/clock/advance")
def _advance(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    return 200, {"now": emu.advance(float(body["seconds"]))}


@route("POST", "/faults/fail")
def _fail(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.fail_next(
        int(body.get("count", 1)),
        code=int(body.get("code", 500)),
        method=body.get("method"),
        path=body.get("path"),
        retry_after=int(body.get("retryAfter", 1)),
    )
    return OK


@route("POST", "/faults/deny")
def _deny(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.deny(
        body["resource"], verb=body.get("verb"), group=body.get("group", ""), namespace=body.get("namespace")
    )
    return OK


@route("DELETE", "/faults/deny")
def _allow(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.allow_all()
    return OK


@route("POST", "/faults/lag-reads")
def _lag(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.lag_reads_after_create(int(body.get("reads", 1)))
    return OK


@route("POST", "/watches/expire-next")
def _expire(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.expire_next_watch(int(body.get("count", 1)), body.get("plural"))
    return OK


@route("POST", "/watches/drop-next")
def _drop_next(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.faults.drop_next_watch(int(body.get("afterEvents", 0)))
    return OK


@route("POST", "/watches/drop")
def _drop(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    return 200, {"dropped": emu.drop_watches()}


@route("POST", "/watches/compact")
def _compact(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.compact()
    return OK


@route("POST", "/token")
def _token(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.set_token(body.get("token"))
    return OK


@route("POST", "/operators/([a-z]+)")
def _install(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.install(match.group(1))
    return OK


@route("DELETE", "/operators/([a-z]+)")
def _uninstall(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.uninstall(match.group(1), keep_crds=bool(body.get("keepCrds")))
    return OK


@route("POST", "/controllers/([a-z-]+)/restart")
def _restart(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.restart_controller(match.group(1))
    return OK


@route("POST", "/nodes/([^/]+)/lose")
def _lose(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.lose_node(match.group(1))
    return OK


@route("POST", "/pods/([^/]+)/([^/]+)/oom")
def _oom(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.oom_kill(match.group(1), match.group(2), body.get("container"))
    return OK


@route("POST", "/images/fail")
def _images(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.fail_image_pulls(body.get("pattern", "*"))
    return OK


@route("DELETE", "/images/fail")
def _heal(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.heal_image_pulls()
    return OK


@route("POST", "/scheduling/block")
def _block(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.block_scheduling(body.get("message") or "0/1 nodes are available: 1 Insufficient cpu.")
    return OK


@route("DELETE", "/scheduling/block")
def _unblock(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.unblock_scheduling()
    return OK


@route("POST", "/adaptdl/([^/]+)/([^/]+)/allocation")
def _allocation(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    emu.reallocate(match.group(1), match.group(2), list(body["allocation"]))
    return OK


@route("GET", "/adaptdl-supervisor/discover/([^/]+)/([^/]+)/([^/]+)")
def _discover(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    """Long poll until every pod of the group has an IP (the supervisor answers 408 on timeout)."""
    namespace, name, group = match.groups()
    deadline = time.monotonic() + int(query.get("timeout", "30"))
    while time.monotonic() < deadline:
        ips: list[str | None] | None = None
        for pod in emu.store.list(("", "pods"), namespace):
            notes = pod["metadata"].get("annotations") or {}
            labels = pod["metadata"].get("labels") or {}
            ip = (pod.get("status") or {}).get("podIP")
            if labels.get("adaptdl/job") != name or notes.get("adaptdl/group") != group or not ip:
                continue
            ips = ips or [None] * int(notes["adaptdl/replicas"])
            ips[int(notes["adaptdl/rank"])] = ip
        if ips is not None and all(ip is not None for ip in ips):
            return 200, ips
        with emu.store.lock:
            emu.store.changed.wait(0.1)
    return 408, None


@route("PUT", "/adaptdl-supervisor/hints/([^/]+)/([^/]+)")
def _hints(emu: KubernetesEmulator, match: re.Match[str], query: dict[str, str], body: Any) -> Answer:
    rt = emu.registry.find("adaptdl.petuum.com", "v1", "adaptdljobs")
    if rt is None:
        raise err.no_such_resource()
    emu.api.patch(
        rt,
        match.group(1),
        match.group(2),
        "application/merge-patch+json",
        {"status": {"train": body}},
        subresource="status",
    )
    return OK
