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
    """The host's name or address."""
    port: int = Field(default=22, gt=0, lt=65536)
    """Its SSH port."""
    user: str
    """The user to log in as."""
    password: Secret | None = None
    """Password login instead of a key."""
    ssh_key_file: ConfigPath | None = Field(default=Path("~/.ssh/id_rsa"), validate_default=True)
    """The private key; when the default file does not exist, the SSH agent and the usual keys are tried."""
    ssh_passphrase: Secret | None = None
    """The key's passphrase."""
    use_active_gpu: bool = False
    """Also place trials on this host's GPUs that other processes are using."""
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    """Trials that may share one of this host's GPUs."""
    gpu_indices: GpuIndices = None
    """The host's GPUs trials may use; unset: all of them."""
    python_path: str | None = None  # directory prepended to PATH on the host (e.g. a conda env's bin)
    """A directory put first on `PATH` on the host (a conda environment's `bin`); `python3` is taken from
    `PATH`."""
    known_hosts: ConfigPath | None = None  # None: the user's ~/.ssh/known_hosts
    """This host's known_hosts file; default: the block's `knownHosts`, else `~/.ssh/known_hosts`."""
    accept_new_host_keys: bool = False  # trust and record a host key seen for the first time
    """Trust a host key seen for the first time and record it; default: the block's setting."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"known_hosts", "accept_new_host_keys"})

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
    """`remote`."""
    machine_list: list[RemoteMachineConfig] = Field(min_length=1)
    """The SSH hosts trials run on."""
    reuse_mode: bool = False  # a long-lived runner per host (training_services/remote/runner.py)
    """Keep one runner per host that starts trial after trial over the open SSH link."""
    known_hosts: ConfigPath | None = None
    """The known_hosts file of every machine that does not set its own (default `~/.ssh/known_hosts`)."""
    accept_new_host_keys: bool = False
    """Trust a host key seen for the first time and record it in `knownHosts`."""
    unreachable_grace_period: Duration = Field(default=300, ge=0)  # a host lost longer fails its trials
    """A host unreachable this long has its trials reported FAILED."""
    allow_partial_fleet: bool = False  # start even when some hosts cannot be reached
    """Start even when some hosts fail their checks; they join when they recover."""
    remote_root: str = "~/trialfleet"  # each host keeps experiments below this directory
    """The directory below which each host keeps its experiments' files."""
    fleet_file: str | None = None
    """A fleet file whose `machines` become `machineList` before validation (docs/shared-fleet.md); unset in a
    built config."""

    uses_shared_storage: ClassVar[bool] = True
    trialfleet_keys: ClassVar[frozenset[str]] = frozenset(
        {
            "known_hosts",
            "accept_new_host_keys",
            "unreachable_grace_period",
            "allow_partial_fleet",
            "remote_root",
            "fleet_file",
        }
    )

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
