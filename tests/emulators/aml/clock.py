"""Time as an object, so tests can hold the emulator's state machines still or move them on at will."""

from __future__ import annotations

import threading
import time


class Clock:
    """Wall-clock time; every timed decision of the emulator (state delays, token expiry) reads it."""

    def now(self) -> float:
        return time.time()


class ManualClock(Clock):
    """A clock that moves only when told to: ``advance(seconds)`` (tests, or ``POST /_emu/clock``)."""

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
