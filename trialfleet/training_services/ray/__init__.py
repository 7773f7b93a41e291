"""The ``ray`` platform: one Ray job per trial attempt, through the Jobs API of the user's Ray cluster.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.lazy_service import service_attribute
from trialfleet.training_services.ray.config import RayConfig

if TYPE_CHECKING:
    from trialfleet.training_services.ray.service import RayTrainingService

__all__ = ["RayConfig", "RayTrainingService"]


__getattr__ = service_attribute(__name__, "RayTrainingService")
