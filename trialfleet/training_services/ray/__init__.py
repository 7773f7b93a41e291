"""The ``ray`` platform: one Ray job per trial attempt, through the Jobs API of the user's Ray cluster."""

from __future__ import annotations

from trialfleet.training_services.ray.config import RayConfig
from trialfleet.training_services.ray.service import RayTrainingService

__all__ = ["RayConfig", "RayTrainingService"]
