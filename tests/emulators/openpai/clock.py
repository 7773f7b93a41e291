"""The emulator's time (:mod:`tests.emulators.common.clock`)."""

from __future__ import annotations

from tests.emulators.common.clock import Clock, ManualClock, SystemClock

__all__ = ["Clock", "ManualClock", "SystemClock"]
