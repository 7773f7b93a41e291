"""The ``local`` platform: trials as process trees on this machine."""

from __future__ import annotations

from trialfleet.training_services.local.config import LocalConfig
from trialfleet.training_services.local.service import LocalTrainingService

__all__ = ["LocalConfig", "LocalTrainingService"]
