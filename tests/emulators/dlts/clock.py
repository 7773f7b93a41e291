"""The emulator's time: the system clock, or a manual one tests move forward.

Every timestamp DLTS reports (``jobTime``, ``startedAt``, ``finishedAt``, log cursors) and every state delay is
read from this clock, so a test with a :class:`ManualClock` decides when a delay has passed.
"""

from __future__ import annotations

import email.utils
import time
from datetime import datetime, timezone
from typing import Protocol

from tests.emulators.common import clock as common


class Clock(Protocol):
    def time(self) -> float: ...


class SystemClock:
    def time(self) -> float:
        return time.time()


class ManualClock(common.ManualClock):
    """Stands still until :meth:`advance` is called. Starts at 2020-06-01T00:00:00Z unless told otherwise."""

    def __init__(self, start: float = 1590969600.0) -> None:
        super().__init__(start)

    def time(self) -> float:
        return self.now()


def iso_utc(moment: float, *, whole_seconds: bool = False) -> str:
    """``k8sUtils.localize_time``: an ISO 8601 time with ``+00:00`` (microseconds unless they are zero).

    Times read from a pod's container state have whole seconds (Kubernetes timestamps); the job manager's own
    ``datetime.now()`` keeps its microseconds.
    """
    stamp = datetime.fromtimestamp(moment, timezone.utc)
    if whole_seconds:
        stamp = stamp.replace(microsecond=0)
    return stamp.isoformat()


def http_date(moment: float) -> str:
    """How Flask's JSON encoder writes the MySQL ``DATETIME`` ``jobTime``: ``Mon, 01 Jun 2020 00:00:00 GMT``."""
    return email.utils.formatdate(int(moment), usegmt=True)


__all__ = ["Clock", "ManualClock", "SystemClock", "http_date", "iso_utc"]
