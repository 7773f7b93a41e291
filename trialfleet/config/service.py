"""``TrainingServiceConfig``: the fields every platform's block has; each platform's model extends it.

A platform's model lives with its platform (``trialfleet/training_services/<platform>/config.py``, or a
plugin's package) and is found by its ``platform`` name through the platform registry, so a built-in and a
third-party platform are validated the same way. The five shortcut fields are copied from the experiment's
top level when unset in the block.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator

from trialfleet.config.base import MAX_TRIAL_GPUS, ConfigModel, ConfigPath, KeyPath, existing

DEFAULT_IMAGE = "msranni/nni:latest"  # NNI's image for its cluster platforms
#: about ``nniManagerIp`` on platforms whose trials report through their trial directory
MANAGER_IP_UNUSED = "trials report through their trial directory, so they never connect to the manager"


class TrainingServiceConfig(ConfigModel):
    """Fields every platform has (NNI's ``TrainingServiceConfig``)."""

    platform: str
    """The platform's name: `local`, `remote`, `slurm`, `ray`, … or a plugin's."""
    trial_command: str
    """The command of one trial; taken from the top level when unset here."""
    trial_code_directory: ConfigPath = Field(default=Path("."), validate_default=True)
    """The trial's code directory; taken from the top level when unset here."""
    # None: no GPU scheduling, GPUs left visible
    trial_gpu_number: int | None = Field(default=None, ge=0, le=MAX_TRIAL_GPUS)
    """GPUs each trial gets on this platform; taken from the top level when unset here."""
    nni_manager_ip: str | None = None
    """The address this platform's trials use to reach the manager; taken from the top level when unset
    here."""
    debug: bool = False  # as the top-level debug: the manager logs at debug level
    """The manager logs at debug level; taken from the top level when unset here."""
    # trialfleet, for hybrid experiments (docs/hybrid.md): this platform's share of the running trials (1 when
    # unset; 0: only when every other platform deferred a trial) and the most it runs at once
    placement_weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """In a hybrid experiment, this platform's share of the running trials (1 when unset; 0: only when every
    other platform deferred a trial)."""
    trial_concurrency: int | None = Field(default=None, gt=0)
    """In a hybrid experiment, the most trials this platform runs at once (unset: no limit of its own)."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"placement_weight", "trial_concurrency"})
    #: whether this platform's trials take their code from the experiment's ``sharedStorage``
    uses_shared_storage: ClassVar[bool] = False

    _check_code_directory = field_validator("trial_code_directory")(existing("directory", "code directory"))


#: trials sharing one GPU (maxTrialNumberPerGpu)
MAX_TRIALS_PER_GPU = 1000


def per_gpu_problem(path: KeyPath, per_gpu: int, gpu_number: int | None) -> list[tuple[KeyPath, str]]:
    """``maxTrialNumberPerGpu`` other than 1 only makes sense when trials ask for GPUs."""
    if per_gpu != 1 and not gpu_number:
        return [(path, "can only differ from 1 when trialGpuNumber is set to a positive number")]
    return []
