"""Fault knobs: what a test can make the emulated DLTS do wrong, each for a number of requests or launches.

- :meth:`Faults.http_error`: the next matching dashboard requests answer a 5xx/429 with Koa's status text
  (an overloaded dashboard, or a RestAPI the dashboard reports as 502 Bad Gateway);
- :meth:`Faults.submit_error`: the next submits answer ``{"error": "Cannot create job!..."}`` with HTTP 200 and
  create nothing (for example the database refusing the row);
- :meth:`Faults.launch_error`: the launcher fails to create the pod; after ``launch_retries`` failures the job
  turns ``error`` with ``errorMsg`` "Cannot submit job!<message>";
- :meth:`Faults.hold`: jobs stay in a state until :meth:`Faults.release` (a long queue, a slow kill).

Pausing, preempting and losing a job act on one job and live on the emulator itself.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from http import HTTPStatus

DEFAULT_SUBMIT_ERROR = "Cannot schedule job. Cannot add job into database."
DEFAULT_LAUNCH_ERROR = "Failed to create pod"


@dataclass
class HttpFault:
    status: int
    remaining: int
    method: str | None
    path: re.Pattern[str] | None
    body: str

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or self.path.search(path) is not None


@dataclass
class LaunchFault:
    message: str
    remaining: int
    job_id: str | None


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._http: list[HttpFault] = []
        self._submit: list[str] = []
        self._launch: list[LaunchFault] = []
        self._held: set[str] = set()

    def http_error(
        self, status: int = 503, count: int = 1, method: str | None = None, path: str | None = None
    ) -> None:
        """The next ``count`` dashboard requests matching ``method`` and the regex ``path`` answer ``status``."""
        body = HTTPStatus(status).phrase
        pattern = re.compile(path) if path is not None else None
        with self._lock:
            self._http.append(HttpFault(status, count, method, pattern, body))

    def take_http(self, method: str, path: str) -> HttpFault | None:
        with self._lock:
            for fault in self._http:
                if fault.remaining > 0 and fault.matches(method, path):
                    fault.remaining -= 1
                    return fault
            self._http = [f for f in self._http if f.remaining > 0]
        return None

    def submit_error(self, message: str = DEFAULT_SUBMIT_ERROR, count: int = 1) -> None:
        with self._lock:
            self._submit.extend([message] * count)

    def take_submit_error(self) -> str | None:
        with self._lock:
            return self._submit.pop(0) if self._submit else None

    def launch_error(
        self, message: str = DEFAULT_LAUNCH_ERROR, count: int = 1, job_id: str | None = None
    ) -> None:
        """The next ``count`` pod creations (of ``job_id`` only, if given) fail with ``message``."""
        with self._lock:
            self._launch.append(LaunchFault(message, count, job_id))

    def take_launch_error(self, job_id: str) -> str | None:
        with self._lock:
            for fault in self._launch:
                if fault.remaining > 0 and fault.job_id in (None, job_id):
                    fault.remaining -= 1
                    return fault.message
        return None

    def hold(self, state: str) -> None:
        with self._lock:
            self._held.add(state)

    def release(self, state: str) -> None:
        with self._lock:
            self._held.discard(state)

    def held(self, state: str) -> bool:
        with self._lock:
            return state in self._held

    def clear(self) -> None:
        with self._lock:
            self._http.clear()
            self._submit.clear()
            self._launch.clear()
            self._held.clear()

    def describe(self) -> dict[str, object]:
        with self._lock:
            return {
                "http": [
                    {
                        "status": f.status,
                        "remaining": f.remaining,
                        "method": f.method,
                        "path": f.path.pattern if f.path else None,
                    }
                    for f in self._http
                    if f.remaining > 0
                ],
                "submit": list(self._submit),
                "launch": [vars(f).copy() for f in self._launch if f.remaining > 0],
                "held": sorted(self._held),
            }


__all__ = ["DEFAULT_LAUNCH_ERROR", "DEFAULT_SUBMIT_ERROR", "Faults", "HttpFault", "LaunchFault"]
