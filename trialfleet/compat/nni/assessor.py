"""``nni.assessor``: custom assessors subclass trialfleet's ``Assessor`` (run in the manager process)."""

from __future__ import annotations

from ._trialfleet import tuning_base

_base = tuning_base()
Assessor = _base.Assessor
AssessResult = _base.AssessResult

__all__ = ["AssessResult", "Assessor"]
