"""The ``local`` platform: trials as process trees on this machine.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.lazy_service import service_attribute
from trialfleet.training_services.local.config import LocalConfig

if TYPE_CHECKING:
    from trialfleet.training_services.local.service import LocalTrainingService

__all__ = ["LocalConfig", "LocalTrainingService"]


__getattr__ = service_attribute(__name__, "LocalTrainingService")
