"""Time for the emulator's controllers, kubelet and timestamps, injectable so a test can move it.

Controllers never sleep on this clock: they loop on real time (a short tick) and compare deadlines with
``clock.now()``, so a :class:`ManualClock` only moves when a test advances it while processes still run in
real time.
"""

from __future__ import annotations

from datetime import datetime, timezone

from tests.emulators.common.clock import Clock, ManualClock, SystemClock


def rfc3339(seconds: float) -> str:
    """``metav1.Time`` as the API shows it: whole seconds, UTC, ``Z``."""
    return datetime.fromtimestamp(int(seconds), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


__all__ = ["Clock", "ManualClock", "SystemClock", "parse_rfc3339", "rfc3339"]
