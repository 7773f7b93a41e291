"""The ``slurm`` platform: one batch job per trial attempt."""

from __future__ import annotations

from trialfleet.training_services.slurm.config import SlurmConfig
from trialfleet.training_services.slurm.service import SlurmTrainingService

__all__ = ["SlurmConfig", "SlurmTrainingService"]
