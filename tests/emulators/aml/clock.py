"""The emulator's time (:mod:`tests.emulators.common.clock`): tests hold its state machines still or move them on."""

from __future__ import annotations

from tests.emulators.common.clock import Clock, ManualClock, SystemClock

__all__ = ["Clock", "ManualClock", "SystemClock"]
