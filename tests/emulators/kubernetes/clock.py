"""Time for the emulator's controllers, kubelet and timestamps, injectable so a test can move it.

Controllers never sleep on this clock: they loop on real time (a short tick) and compare deadlines with
``clock.now()``, so a :class:`ManualClock` only moves when a test advances it while processes still run in
real time.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that stands still until :meth:`advance`; starts at the real time of its creation."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now


def rfc3339(seconds: float) -> str:
    """``metav1.Time`` as the API shows it: whole seconds, UTC, ``Z``."""
    return datetime.fromtimestamp(int(seconds), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
