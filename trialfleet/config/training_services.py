"""Training-service blocks of the platforms trialfleet runs itself: ``local``, ``remote`` and ``slurm``.

The cluster platforms that the schema accepts but trialfleet does not run yet are in ``cluster_services``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from trialfleet.config.base import (
    ConfigModel,
    ConfigPath,
    Duration,
    GpuIndices,
    KeyPath,
    Secret,
    SizeMB,
    existing,
    raise_problems,
    resolve_path,
)


class TrainingServiceBase(ConfigModel):
    """Fields every platform has. The five shortcut fields are copied from the top level when unset here."""

    platform: str
    trial_command: str
    trial_code_directory: ConfigPath = Field(default=Path("."), validate_default=True)
    trial_gpu_number: int | None = Field(default=None, ge=0)  # None: no GPU scheduling, GPUs left visible
    nni_manager_ip: str | None = None
    debug: bool = False

    _check_code_directory = field_validator("trial_code_directory")(existing("directory", "code directory"))


def _per_gpu_problem(path: KeyPath, per_gpu: int, gpu_number: int | None) -> list[tuple[KeyPath, str]]:
    if per_gpu != 1 and not gpu_number:
        return [(path, "can only differ from 1 when trialGpuNumber is set to a positive number")]
    return []


class LocalConfig(TrainingServiceBase):
    """``platform: local``.

    ``use_active_gpu`` defaults to False (NNI's documented default) instead of NNI's "must be set when
    trialGpuNumber > 0": a trial waiting for an idle GPU shows why it waits, so nothing hangs silently.
    """

    platform: Literal["local"] = "local"
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = Field(default=1, gt=0)
    gpu_indices: GpuIndices = None
    reuse_mode: bool = False

    @model_validator(mode="after")
    def _check_local(self) -> LocalConfig:
        self.nni_manager_ip = None  # trials reach the manager on this machine
        raise_problems(
            _per_gpu_problem(("maxTrialNumberPerGpu",), self.max_trial_number_per_gpu, self.trial_gpu_number)
        )
        return self


class RemoteMachineConfig(ConfigModel):
    """One SSH host. A ``password`` replaces the key file; secrets never print (``SecretStr``).

    The default key file ``~/.ssh/id_rsa`` is checked when the remote experiment starts, not here, so a
    config can be validated on a machine that holds no key (an SSH agent may also provide one).
    """

    host: str
    port: int = Field(default=22, gt=0, lt=65536)
    user: str
    password: Secret | None = None
    ssh_key_file: ConfigPath | None = Field(default=Path("~/.ssh/id_rsa"), validate_default=True)
    ssh_passphrase: Secret | None = None
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = Field(default=1, gt=0)
    gpu_indices: GpuIndices = None
    python_path: str | None = None  # directory prepended to PATH on the host (e.g. a conda env's bin)
    known_hosts: ConfigPath | None = None  # None: the user's ~/.ssh/known_hosts
    accept_new_host_keys: bool = False  # trust and record a host key seen for the first time

    @model_validator(mode="after")
    def _password_replaces_key(self) -> RemoteMachineConfig:
        if self.password is not None:
            self.ssh_key_file = None
        return self


class RemoteConfig(TrainingServiceBase):
    """``platform: remote``: a fleet of SSH hosts.

    ``known_hosts`` and ``accept_new_host_keys`` set here apply to every machine that does not set its own.
    """

    platform: Literal["remote"] = "remote"
    machine_list: list[RemoteMachineConfig] = Field(min_length=1)
    reuse_mode: bool = False
    known_hosts: ConfigPath | None = None
    accept_new_host_keys: bool = False
    unreachable_grace_period: Duration = Field(default=300, ge=0)  # a host lost longer fails its trials
    allow_partial_fleet: bool = False  # start even when some hosts cannot be reached

    @model_validator(mode="after")
    def _check_fleet(self) -> RemoteConfig:
        problems: list[tuple[KeyPath, str]] = []
        for index, machine in enumerate(self.machine_list):
            if "known_hosts" not in machine.model_fields_set:
                machine.known_hosts = self.known_hosts
            if "accept_new_host_keys" not in machine.model_fields_set:
                machine.accept_new_host_keys = self.accept_new_host_keys
            path = ("machineList", index, "maxTrialNumberPerGpu")
            problems += _per_gpu_problem(path, machine.max_trial_number_per_gpu, self.trial_gpu_number)
        raise_problems(problems)
        return self


class SlurmConfig(TrainingServiceBase):
    """``platform: slurm``: one Slurm job per trial, trial directories on a filesystem shared with the nodes.

    ``shared_directory`` is a path on this machine; with ``login_node`` set (the manager is outside the
    cluster and drives Slurm over SSH) it is a path on the cluster and must be absolute.
    """

    platform: Literal["slurm"] = "slurm"
    shared_directory: Path
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: Duration | None = Field(default=None, gt=0)  # None: taken from maxTrialDuration
    cpus_per_trial: int | None = Field(default=None, gt=0)
    memory: SizeMB | None = Field(default=None, gt=0)
    gpu_request_style: Literal["gres", "gpus"] = "gres"  # --gres=gpu:N or --gpus=N
    sbatch_options: list[str] = Field(default_factory=list)  # extra "#SBATCH" options, e.g. "--exclusive"
    setup_script: str | None = (
        None  # shell lines run in the job before the trial (module load, conda activate)
    )
    login_node: RemoteMachineConfig | None = None
    use_sacct: bool | None = None  # None: use sacct when accounting is enabled
    python_path: str | None = None

    @model_validator(mode="after")
    def _place_shared_directory(self, info: ValidationInfo) -> SlurmConfig:
        if self.login_node is None:
            self.shared_directory = resolve_path(self.shared_directory, info)
        elif not self.shared_directory.is_absolute():
            message = "must be an absolute path on the cluster when loginNode is set"
            raise_problems([(("sharedDirectory",), message)])
        return self
