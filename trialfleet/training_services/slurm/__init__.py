"""The ``slurm`` platform: one batch job per trial attempt.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.lazy_service import service_attribute
from trialfleet.training_services.slurm.config import SlurmConfig

if TYPE_CHECKING:
    from trialfleet.training_services.slurm.service import SlurmTrainingService

__all__ = ["SlurmConfig", "SlurmTrainingService"]


__getattr__ = service_attribute(__name__, "SlurmTrainingService")
