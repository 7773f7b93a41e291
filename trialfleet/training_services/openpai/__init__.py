"""The ``openpai`` platform: one OpenPAI job per trial attempt, its files on a storage the manager mounts too."""

from __future__ import annotations

from trialfleet.training_services.openpai.config import OpenpaiConfig
from trialfleet.training_services.openpai.service import OpenpaiTrainingService

__all__ = ["OpenpaiConfig", "OpenpaiTrainingService"]
