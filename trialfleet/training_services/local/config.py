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
    """`local`."""
    use_active_gpu: bool = False
    """Also place trials on GPUs that other processes are using (default: wait for an idle GPU, showing why
    the trial waits)."""
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    """Trials that may share one GPU (only with `trialGpuNumber` set)."""
    gpu_indices: GpuIndices = None
    """The GPUs trials may use (`0,1` or a list); unset: all of them."""
    reuse_mode: bool = False
    """NNI's reuse mode."""
    fleet_file: str | None = None
    """A fleet file whose `local` section joins this block before validation (docs/shared-fleet.md); unset in a
    built config."""

    uses_shared_storage: ClassVar[bool] = True
    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"fleet_file"})

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
