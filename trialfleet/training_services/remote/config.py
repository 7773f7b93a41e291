"""``platform: remote``: a fleet of SSH hosts. ``RemoteMachineConfig`` also describes a Slurm login node."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from trialfleet.config.base import (
    ConfigModel,
    ConfigPath,
    Duration,
    GpuIndices,
    KeyPath,
    Secret,
    raise_problems,
)
from trialfleet.config.service import (
    MANAGER_IP_UNUSED,
    MAX_TRIALS_PER_GPU,
    TrainingServiceConfig,
    per_gpu_problem,
)


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
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    gpu_indices: GpuIndices = None
    python_path: str | None = None  # directory prepended to PATH on the host (e.g. a conda env's bin)
    known_hosts: ConfigPath | None = None  # None: the user's ~/.ssh/known_hosts
    accept_new_host_keys: bool = False  # trust and record a host key seen for the first time

    @model_validator(mode="after")
    def _password_replaces_key(self) -> RemoteMachineConfig:
        if self.password is not None:
            self.ssh_key_file = None
        return self


class RemoteConfig(TrainingServiceConfig):
    """``platform: remote``: a fleet of SSH hosts.

    ``known_hosts`` and ``accept_new_host_keys`` set here apply to every machine that does not set its own.
    """

    platform: Literal["remote"] = "remote"
    machine_list: list[RemoteMachineConfig] = Field(min_length=1)
    reuse_mode: bool = False  # a long-lived runner per host (training_services/remote/runner.py)
    known_hosts: ConfigPath | None = None
    accept_new_host_keys: bool = False
    unreachable_grace_period: Duration = Field(default=300, ge=0)  # a host lost longer fails its trials
    allow_partial_fleet: bool = False  # start even when some hosts cannot be reached
    remote_root: str = "~/trialfleet"  # each host keeps experiments below this directory
    #: its ``machines`` become machineList before validation (config/fleet.py): unset in a built config
    fleet_file: str | None = None

    uses_shared_storage: ClassVar[bool] = True

    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " (the manager reads them over SSH)",
    }

    @model_validator(mode="after")
    def _check_fleet(self) -> RemoteConfig:
        problems: list[tuple[KeyPath, str]] = []
        for index, machine in enumerate(self.machine_list):
            if "known_hosts" not in machine.model_fields_set:
                machine.known_hosts = self.known_hosts
            if "accept_new_host_keys" not in machine.model_fields_set:
                machine.accept_new_host_keys = self.accept_new_host_keys
            path = ("machineList", index, "maxTrialNumberPerGpu")
            problems += per_gpu_problem(path, machine.max_trial_number_per_gpu, self.trial_gpu_number)
        raise_problems(problems)
        return self
