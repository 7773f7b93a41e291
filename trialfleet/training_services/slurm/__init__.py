"""The ``slurm`` platform: one batch job per trial attempt.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trialfleet.training_services.slurm.config import SlurmConfig

if TYPE_CHECKING:
    from trialfleet.training_services.slurm.service import SlurmTrainingService

__all__ = ["SlurmConfig", "SlurmTrainingService"]


def __getattr__(name: str) -> Any:
    if name == "SlurmTrainingService":
        from trialfleet.training_services.slurm.service import SlurmTrainingService

        return SlurmTrainingService
    raise AttributeError(name)
