"""The ``openpai`` platform: one OpenPAI job per trial attempt, its files on a storage the manager mounts too.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.lazy_service import service_attribute
from trialfleet.training_services.openpai.config import OpenpaiConfig

if TYPE_CHECKING:
    from trialfleet.training_services.openpai.service import OpenpaiTrainingService

__all__ = ["OpenpaiConfig", "OpenpaiTrainingService"]


__getattr__ = service_attribute(__name__, "OpenpaiTrainingService")
