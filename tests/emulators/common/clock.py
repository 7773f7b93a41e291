"""Time as an object for the emulators: their controllers, state delays, rate limits and token expiry read it.

A test that wants to skip an hour (a rate-limit window, a token's lifetime, a slow state) uses
:class:`ManualClock` and advances it; processes still run in real time, and controllers loop on real time,
comparing deadlines with ``clock.now()``.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """Starts at the current time (or ``start``) and moves only when advanced (tests, or a control route)."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        with self._lock:
            self._now += seconds
            return self._now


__all__ = ["Clock", "ManualClock", "SystemClock"]
