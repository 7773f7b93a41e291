"""The ``dlts`` platform: one DLTS (DLWorkspace) job per trial attempt, through the cluster's dashboard.

The service (``.service``, which needs httpx) is imported only when asked for: the config model is imported
by every config load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.dlts.config import DltsConfig
from trialfleet.training_services.lazy_service import service_attribute

if TYPE_CHECKING:
    from trialfleet.training_services.dlts.service import DltsTrainingService

__all__ = ["DltsConfig", "DltsTrainingService"]


__getattr__ = service_attribute(__name__, "DltsTrainingService")
