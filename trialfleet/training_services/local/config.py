"""``platform: local``: trials as process trees on this machine."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from trialfleet.config.base import GpuIndices, raise_problems
from trialfleet.config.service import (
    MANAGER_IP_UNUSED,
    MAX_TRIALS_PER_GPU,
    TrainingServiceConfig,
    per_gpu_problem,
)


class LocalConfig(TrainingServiceConfig):
    """``platform: local``.

    ``use_active_gpu`` defaults to False (NNI's documented default) instead of NNI's "must be set when
    trialGpuNumber > 0": a trial waiting for an idle GPU shows why it waits, so nothing hangs silently.
    """

    platform: Literal["local"] = "local"
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    gpu_indices: GpuIndices = None
    reuse_mode: bool = False
    #: its ``local`` keys join this block before validation (config/fleet.py): unset in a built config
    fleet_file: str | None = None

    uses_shared_storage: ClassVar[bool] = True

    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED,
        "reuse_mode": "local trials start in a few milliseconds; there is no environment to reuse",
    }

    @model_validator(mode="after")
    def _check_local(self) -> LocalConfig:
        raise_problems(
            per_gpu_problem(("maxTrialNumberPerGpu",), self.max_trial_number_per_gpu, self.trial_gpu_number)
        )
        return self
