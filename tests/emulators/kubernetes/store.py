"""The emulated etcd: objects by resource, one global ``resourceVersion`` counter and a bounded event log.

Every write takes the next resourceVersion and appends an event (ADDED, MODIFIED or DELETED) that watches
replay. The log keeps the last ``window`` events; a watch or a paginated list that asks for an older
version gets 410 Expired, as with a compacted etcd. Objects are stored and handed out as deep copies, so
nothing outside the store can change them without a write.

Thread safety: every method takes ``lock``; ``changed`` is notified after each write (watches and
controllers wait on it).
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TypeKey = tuple[str, str]  # (group, plural)


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: TypeKey
    namespace: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


class Store:
    def __init__(self, window: int = 1000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.window = window
        self._objects: dict[TypeKey, dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 0
        self._events: deque[Event] = deque()
        self._compacted = 0  # every event with rv > this is still in the log

    # ---- reads ---------------------------------------------------------------------------------------

    @property
    def rv(self) -> int:
        with self.lock:
            return self._rv

    @property
    def compacted(self) -> int:
        with self.lock:
            return self._compacted

    def get(self, key: TypeKey, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self._objects.get(key, {}).get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, key: TypeKey, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        with self.lock:
            items = self._objects.get(key, {})
            chosen = [obj for (ns, _), obj in sorted(items.items()) if namespace is None or ns == namespace]
            return copy.deepcopy(chosen)

    def keys(self) -> builtins.list[TypeKey]:
        with self.lock:
            return list(self._objects)

    def all_objects(self) -> Iterator[tuple[TypeKey, dict[str, Any]]]:
        with self.lock:
            snapshot = [
                (key, copy.deepcopy(obj)) for key, objs in self._objects.items() for obj in objs.values()
            ]
        yield from snapshot

    def events_after(self, rv: int) -> builtins.list[Event] | None:
        """Events newer than ``rv``, or None when some of them were already compacted away."""
        with self.lock:
            if rv < self._compacted:
                return None
            return [event for event in self._events if event.rv > rv]

    # ---- writes --------------------------------------------------------------------------------------

    def _record(self, event_type: str, key: TypeKey, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        event = Event(
            self._rv, event_type, key, obj["metadata"].get("namespace", ""), copy.deepcopy(obj), old
        )
        self._events.append(event)
        while len(self._events) > self.window:
            self._compacted = self._events.popleft().rv
        self.changed.notify_all()

    def create(self, key: TypeKey, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            meta = obj["metadata"]
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            stored = copy.deepcopy(obj)
            self._objects.setdefault(key, {})[(meta.get("namespace", ""), meta["name"])] = stored
            self._record("ADDED", key, stored, None)
            return copy.deepcopy(stored)

    def update(self, key: TypeKey, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            meta = obj["metadata"]
            slot = (meta.get("namespace", ""), meta["name"])
            old = self._objects[key][slot]
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            stored = copy.deepcopy(obj)
            self._objects[key][slot] = stored
            self._record("MODIFIED", key, stored, old)
            return copy.deepcopy(stored)

    def remove(self, key: TypeKey, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            old = self._objects[key].pop((namespace, name))
            self._rv += 1
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._record("DELETED", key, gone, old)
            return copy.deepcopy(gone)

    def compact(self) -> None:
        """Forget every event so far, as an etcd compaction does (any older watch then gets 410)."""
        with self.lock:
            self._events.clear()
            self._compacted = self._rv

    def notify(self) -> None:
        with self.lock:
            self.changed.notify_all()
