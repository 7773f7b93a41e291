"""``platform: slurm``: one batch job per trial (or, with ``reuseMode``, worker jobs running trial after trial),
trial directories on a filesystem shared with the nodes."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, model_validator

from trialfleet.config.base import Duration, SizeMB, raise_problems, resolve_path
from trialfleet.config.service import (
    MANAGER_IP_UNUSED,
    MAX_TRIALS_PER_GPU,
    TrainingServiceConfig,
    per_gpu_problem,
)
from trialfleet.training_services.remote.config import RemoteMachineConfig

#: CPUs of one trial's job (cpusPerTrial): a job across hundreds of nodes stays below it
MAX_CPUS_PER_TRIAL = 100_000


class SlurmConfig(TrainingServiceConfig):
    """``platform: slurm``.

    ``shared_directory`` is a path on this machine; with ``login_node`` set (the manager is outside the
    cluster and drives Slurm over SSH) it is a path on the cluster and must be absolute.
    """

    platform: Literal["slurm"] = "slurm"
    """`slurm`."""
    shared_directory: Path
    """A directory the manager and every node see (trial directories, the code); with `loginNode`, an absolute
    path on the cluster."""
    partition: str | None = None
    """`--partition`; default: the cluster's."""
    account: str | None = None
    """`--account`; default: the cluster's."""
    qos: str | None = None
    """`--qos`; default: the cluster's."""
    time_limit: Duration | None = Field(default=None, gt=0)  # None: taken from maxTrialDuration
    """Slurm's time limit per trial (`--time`, rounded up to whole minutes); default: `maxTrialDuration`. With
    `reuseMode`, the time limit of each worker job (default: the partition's), trials being held to
    `maxTrialDuration` by their keeper."""
    cpus_per_trial: int | None = Field(default=None, gt=0, le=MAX_CPUS_PER_TRIAL)
    """`--cpus-per-task`; default: the cluster's."""
    memory: SizeMB | None = Field(default=None, gt=0)
    """`--mem`, e.g. `16gb`; default: the cluster's."""
    gpu_request_style: Literal["gres", "gpus"] = "gres"  # --gres=gpu:N or --gpus=N
    """How `trialGpuNumber: N` is asked for: `gres` → `--gres=gpu:N`, `gpus` → `--gpus=N`."""
    sbatch_options: list[str] = Field(default_factory=list)  # extra sbatch options, e.g. "--exclusive"
    """More sbatch options, one per item, written `--name=value` (`--exclusive`, `--constraint=a100`)."""
    setup_script: str | None = (
        None  # shell lines run in the job before the trial (module load, conda activate)
    )
    """Shell lines run in the job before the trial (`module load …`, `conda activate …`)."""
    login_node: RemoteMachineConfig | None = None
    """A cluster host to drive Slurm through over SSH, when the manager runs outside the cluster (keys as a
    remote `machineList` entry)."""
    use_sacct: bool | None = None  # None: use sacct when accounting is enabled
    """Ask `sacct` about jobs `squeue` no longer shows; unset: when the cluster has accounting."""
    python_path: str | None = None
    """A directory put first on the job's `PATH` after the setup script (a conda environment's `bin`)."""
    reuse_mode: bool = False
    """Run trials in long-lived worker jobs, trial after trial, instead of one job per trial (docs/reuse.md)."""
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    """With `reuseMode` and `trialGpuNumber` set: how many trials one worker job runs at once, sharing its
    GPUs."""
    worker_idle_timeout: Duration = Field(default=60, gt=0)
    """With `reuseMode`: how long a worker job with no trial is kept before it is released (e.g. `5m`)."""

    uses_shared_storage: ClassVar[bool] = True
    nni_model: ClassVar[bool] = False  # NNI has no Slurm platform

    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " on the shared directory",
    }

    @model_validator(mode="after")
    def _place_shared_directory(self, info: ValidationInfo) -> SlurmConfig:
        per_gpu = per_gpu_problem(("maxTrialNumberPerGpu",), self.max_trial_number_per_gpu, self.trial_gpu_number)
        if per_gpu:
            raise_problems(per_gpu)
        if self.login_node is None:
            self.shared_directory = resolve_path(self.shared_directory, info)
        elif not self.shared_directory.is_absolute():
            message = "must be an absolute path on the cluster when loginNode is set"
            raise_problems([(("sharedDirectory",), message)])
        return self
