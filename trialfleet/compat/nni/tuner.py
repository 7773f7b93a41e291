"""``nni.tuner``: custom tuners subclass trialfleet's ``Tuner`` (run in the manager process)."""

from __future__ import annotations

from ._trialfleet import tuning_base

_base = tuning_base()
Tuner = _base.Tuner

__all__ = ["Tuner"]
