"""The ``dlts`` platform: one DLTS (DLWorkspace) job per trial attempt, through the cluster's dashboard."""

from __future__ import annotations

from trialfleet.training_services.dlts.config import DltsConfig
from trialfleet.training_services.dlts.service import DltsTrainingService

__all__ = ["DltsConfig", "DltsTrainingService"]
