"""Watch streams: the events of one resource (optionally one namespace and selectors) from a resourceVersion.

Semantics of the real watch cache, as clients see them:
- no ``resourceVersion`` (or ``"0"``): synthetic ADDED events for what exists now, then the changes;
- a version still in the window: every change after it; an older one: one ERROR event carrying a 410
  ``Expired`` Status (``too old resource version: N (M)``), then the stream ends;
- an object that stops matching the selectors arrives as DELETED, one that starts matching as ADDED;
- ``allowWatchBookmarks``: BOOKMARK events carrying only the current resourceVersion, and with
  ``sendInitialEvents`` one annotated ``k8s.io/initial-events-end`` after the initial ADDED events;
- ``timeoutSeconds``: the stream ends cleanly after that many (real) seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import bad_request, expired
from .query_selectors import FieldSelector, LabelSelector, fields_match, labels_match
from .resources import ResourceType
from .store import Event, Store


class WatchDropped(Exception):
    """The connection must be cut without a clean end (the dropped-connection fault)."""


@dataclass
class WatchRequest:
    rt: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    resource_version: str | None
    timeout: float | None = None
    bookmarks: bool = False
    send_initial: bool = False
    bookmark_interval: float = 1.0
    expire: bool = False  # forced 410 on this watch (fault)


@dataclass(eq=False)
class WatchHandle:
    """Lets the server end or cut a running watch from outside."""

    stopped: bool = False
    dropped: bool = False
    drop_after: int | None = None  # cut after this many events (fault)
    sent: int = field(default=0)


def _matches(request: WatchRequest, obj: dict[str, Any] | None) -> bool:
    if obj is None:
        return False
    if request.namespace is not None and obj["metadata"].get("namespace", "") != request.namespace:
        return False
    return labels_match(request.labels, obj["metadata"].get("labels")) and fields_match(request.fields, obj)


def convert(request: WatchRequest, event: Event) -> dict[str, Any] | None:
    """The event as this watcher sees it, given its selectors (the cacher's ``convertToWatchEvent``)."""
    if event.key != request.rt.key:
        return None
    now = event.type != "DELETED" and _matches(request, event.obj)
    before = _matches(request, event.old)
    if now and not before:
        return {"type": "ADDED", "object": event.obj}
    if now and before:
        return {"type": "MODIFIED", "object": event.obj}
    if before:
        return {"type": "DELETED", "object": event.obj}
    return None


def expired_event(requested: int, oldest: int) -> dict[str, Any]:
    error = expired(f"too old resource version: {requested} ({oldest})")
    return {"type": "ERROR", "object": error.status}


def bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}


def _start(request: WatchRequest, store: Store) -> tuple[list[dict[str, Any]], int | None]:
    """Initial events and the version to continue from (None: the stream ends after the initial events)."""
    version = request.resource_version
    if version in (None, "", "0") or request.send_initial:
        with store.lock:
            current = store.rv
            objects = [o for o in store.list(request.rt.key, request.namespace) if _matches(request, o)]
        initial = [{"type": "ADDED", "object": obj} for obj in objects]
        if request.send_initial and request.bookmarks:
            initial.append(bookmark(request.rt, current, initial_end=True))
        return initial, current
    try:
        requested = int(version)
    except ValueError:
        raise bad_request(
            f'invalid resource version: strconv.ParseUint: parsing "{version}": invalid syntax'
        ) from None
    if request.expire or store.events_after(requested) is None:
        return [expired_event(requested, max(store.compacted, requested + 1))], None
    return [], requested


def stream(request: WatchRequest, store: Store, handle: WatchHandle) -> Iterator[dict[str, Any]]:
    """The watch's events until timeout, stop or drop (:class:`WatchDropped` then cuts the connection).

    A malformed resourceVersion raises here, before anything is sent; the rest is lazy.
    """
    initial, last = _start(request, store)
    return _events(request, store, handle, initial, last)


def _events(
    request: WatchRequest, store: Store, handle: WatchHandle, initial: list[dict[str, Any]], last: int | None
) -> Iterator[dict[str, Any]]:
    for event in initial:
        yield _counted(handle, event)
    if last is None:
        return
    deadline = None if request.timeout is None else time.monotonic() + request.timeout
    quiet_since = time.monotonic()
    while True:
        with store.lock:
            pending = store.events_after(last)
            if pending is None:
                yield _counted(handle, expired_event(last, store.compacted))
                return
            if not pending and not handle.stopped and not handle.dropped:
                store.changed.wait(0.05)
                pending = store.events_after(last) or []
        if handle.dropped:
            raise WatchDropped
        if handle.stopped or (deadline is not None and time.monotonic() >= deadline):
            return
        for change in pending:
            last = change.rv
            seen = convert(request, change)
            if seen is not None:
                quiet_since = time.monotonic()
                yield _counted(handle, seen)
        if request.bookmarks and time.monotonic() - quiet_since >= request.bookmark_interval:
            quiet_since = time.monotonic()
            yield bookmark(request.rt, max(last, store.rv))


def _counted(handle: WatchHandle, event: dict[str, Any]) -> dict[str, Any]:
    if handle.drop_after is not None and handle.sent >= handle.drop_after:
        raise WatchDropped
    handle.sent += 1
    return event
