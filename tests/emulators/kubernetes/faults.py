"""Faults a test can inject at the API level: transient errors, RBAC denials, lagging reads, broken watches.

Pod-level faults (stuck scheduling, image pulls, OOM kills, lost nodes) belong to the kubelet and
scheduler; controller restarts to the emulator. Each knob here is consumed by the HTTP layer only, so
the emulated controllers never see these faults, as a cluster's controllers would not see a client's.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from . import errors as err


@dataclass
class _Failure:
    code: int
    remaining: int
    method: str | None
    path: re.Pattern[str] | None
    retry_after: int


@dataclass(frozen=True)
class Denial:
    verb: str | None  # None: every verb
    plural: str
    group: str
    namespace: str | None


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._denials: list[Denial] = []
        self._lag_reads = 0
        self._hidden: dict[str, int] = {}
        self._expire_watches: dict[str | None, int] = {}  # by resource plural; None: any resource
        self._drop_watches: list[int] = []

    # ---- transient errors ----------------------------------------------------------------------------

    def fail_next(
        self,
        count: int = 1,
        *,
        code: int = 500,
        method: str | None = None,
        path: str | None = None,
        retry_after: int = 1,
    ) -> None:
        """The next ``count`` matching requests fail with ``code`` (500, 503, 504 or 429)."""
        with self._lock:
            pattern = re.compile(path) if path else None
            self._failures.append(
                _Failure(code, count, method.upper() if method else None, pattern, retry_after)
            )

    def take_failure(self, method: str, path: str) -> tuple[err.ApiError, dict[str, str]] | None:
        with self._lock:
            for failure in self._failures:
                if failure.method not in (None, method) or (failure.path and not failure.path.search(path)):
                    continue
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return _transient(failure.code, failure.retry_after)
        return None

    # ---- RBAC ----------------------------------------------------------------------------------------

    def deny(
        self, plural: str, *, verb: str | None = None, group: str = "", namespace: str | None = None
    ) -> None:
        """Refuse ``verb`` (every verb when None) on a resource with the RBAC 403."""
        with self._lock:
            self._denials.append(Denial(verb, plural, group, namespace))

    def allow_all(self) -> None:
        with self._lock:
            self._denials.clear()

    def denied(self, verb: str, plural: str, group: str, namespace: str | None) -> bool:
        with self._lock:
            return any(
                d.verb in (None, verb)
                and d.plural == plural
                and d.group == group
                and d.namespace in (None, namespace)
                for d in self._denials
            )

    # ---- eventual consistency ------------------------------------------------------------------------

    def lag_reads_after_create(self, reads: int = 1) -> None:
        """Objects created from now on answer 404 to their next ``reads`` GETs (a stale cache behind a LB)."""
        with self._lock:
            self._lag_reads = reads

    def created(self, path: str) -> None:
        with self._lock:
            if self._lag_reads:
                self._hidden[path] = self._lag_reads

    def hidden(self, path: str) -> bool:
        with self._lock:
            left = self._hidden.get(path, 0)
            if left <= 0:
                return False
            self._hidden[path] = left - 1
            return True

    # ---- watches -------------------------------------------------------------------------------------

    def expire_next_watch(self, count: int = 1, plural: str | None = None) -> None:
        """The next ``count`` watches that give a resourceVersion get the 410 ERROR event: of the resource
        ``plural`` only, or of any resource."""
        with self._lock:
            self._expire_watches[plural] = self._expire_watches.get(plural, 0) + count

    def take_expire(self, plural: str) -> bool:
        with self._lock:
            for key in (plural, None):
                if self._expire_watches.get(key):
                    self._expire_watches[key] -= 1
                    return True
            return False

    def drop_next_watch(self, after_events: int = 0) -> None:
        """The next watch connection is cut (no clean end) after sending ``after_events`` events."""
        with self._lock:
            self._drop_watches.append(after_events)

    def take_drop(self) -> int | None:
        with self._lock:
            return self._drop_watches.pop(0) if self._drop_watches else None


def _transient(code: int, retry_after: int) -> tuple[err.ApiError, dict[str, str]]:
    if code == 429:
        return err.too_many_requests(retry_after), {"Retry-After": str(retry_after)}
    if code == 503:
        return err.service_unavailable(), {}
    if code == 504:
        return err.ApiError(
            504, "Timeout", "Timeout: request did not complete within the allotted timeout", {}
        ), {}
    return err.internal("injected fault: etcdserver: request timed out"), {}
