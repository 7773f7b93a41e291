"""The ``aml`` platform: one Azure ML command job per trial attempt (SDK v2, ``trialfleet[aml]``).

The service is imported only when asked for; the Azure SDK only when the platform starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.aml.config import AmlConfig
from trialfleet.training_services.lazy_service import service_attribute

if TYPE_CHECKING:
    from trialfleet.training_services.aml.service import AmlTrainingService

__all__ = ["AmlConfig", "AmlTrainingService"]


__getattr__ = service_attribute(__name__, "AmlTrainingService")
