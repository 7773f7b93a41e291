"""``platform: slurm``: one batch job per trial, trial directories on a filesystem shared with the nodes."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, model_validator

from trialfleet.config.base import Duration, SizeMB, raise_problems, resolve_path
from trialfleet.config.service import MANAGER_IP_UNUSED, TrainingServiceConfig
from trialfleet.training_services.remote.config import RemoteMachineConfig

#: CPUs of one trial's job (cpusPerTrial): a job across hundreds of nodes stays below it
MAX_CPUS_PER_TRIAL = 100_000


class SlurmConfig(TrainingServiceConfig):
    """``platform: slurm``.

    ``shared_directory`` is a path on this machine; with ``login_node`` set (the manager is outside the
    cluster and drives Slurm over SSH) it is a path on the cluster and must be absolute.
    """

    platform: Literal["slurm"] = "slurm"
    shared_directory: Path
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: Duration | None = Field(default=None, gt=0)  # None: taken from maxTrialDuration
    cpus_per_trial: int | None = Field(default=None, gt=0, le=MAX_CPUS_PER_TRIAL)
    memory: SizeMB | None = Field(default=None, gt=0)
    gpu_request_style: Literal["gres", "gpus"] = "gres"  # --gres=gpu:N or --gpus=N
    sbatch_options: list[str] = Field(default_factory=list)  # extra sbatch options, e.g. "--exclusive"
    setup_script: str | None = (
        None  # shell lines run in the job before the trial (module load, conda activate)
    )
    login_node: RemoteMachineConfig | None = None
    use_sacct: bool | None = None  # None: use sacct when accounting is enabled
    python_path: str | None = None

    uses_shared_storage: ClassVar[bool] = True

    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " on the shared directory",
    }

    @model_validator(mode="after")
    def _place_shared_directory(self, info: ValidationInfo) -> SlurmConfig:
        if self.login_node is None:
            self.shared_directory = resolve_path(self.shared_directory, info)
        elif not self.shared_directory.is_absolute():
            message = "must be an absolute path on the cluster when loginNode is set"
            raise_problems([(("sharedDirectory",), message)])
        return self
