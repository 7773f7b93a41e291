"""Injected failures: the next N requests matching a method and a path pattern are answered with an error status
(throttling 429 with ``Retry-After``, 500, 502, 503, 504) in the answering service's own error format."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from .wire import Request

DEFAULT_CODES = {
    429: (
        "TooManyRequests",
        "The request was throttled: too many requests for this workspace. Retry after the period in the Retry-After header.",
    ),
    500: ("InternalServerError", "An unexpected error occurred while processing the request."),
    502: ("BadGateway", "The gateway did not receive a response from the service."),
    503: ("ServiceUnavailable", "The service is temporarily unavailable. Please retry the request."),
    504: ("GatewayTimeout", "The gateway did not receive a response within the specified time period."),
}
STORAGE_CODES = {429: "ServerBusy", 500: "InternalError", 503: "ServerBusy"}


@dataclass
class Fault:
    status: int
    times: int  # how many more matching requests fail
    method: str | None = None
    path: re.Pattern[str] | None = None  # searched in the decoded path
    retry_after: float | None = None
    code: str | None = None
    message: str | None = None
    hits: int = 0

    def matches(self, request: Request) -> bool:
        if self.method is not None and request.method != self.method.upper():
            return False
        return self.path is None or self.path.search(request.path) is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "times": self.times,
            "method": self.method,
            "path": self.path.pattern if self.path else None,
            "retryAfter": self.retry_after,
            "hits": self.hits,
        }


class FaultPlan:
    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(
        self,
        status: int,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: float | None = None,
        code: str | None = None,
        message: str | None = None,
    ) -> Fault:
        if status == 429 and retry_after is None:
            retry_after = 1
        fault = Fault(status, times, method, re.compile(path) if path else None, retry_after, code, message)
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, request: Request) -> Fault | None:
        """The first armed fault matching ``request``, consuming one of its uses."""
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.matches(request):
                    fault.times -= 1
                    fault.hits += 1
                    return fault
        return None

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.to_dict() for fault in self._faults]


def fault_codes(fault: Fault, storage: bool) -> tuple[str, str]:
    default_code, default_message = DEFAULT_CODES.get(
        fault.status, ("InternalServerError", "An error was injected.")
    )
    if storage:
        default_code = STORAGE_CODES.get(fault.status, default_code)
    return fault.code or default_code, fault.message or default_message
