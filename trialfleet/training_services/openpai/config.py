"""``platform: openpai``: one OpenPAI job per trial (NNI's OpenPAI mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from trialfleet.config.base import ConfigPath, JsonMapping, KeyPath, Secret, SizeMB, existing, raise_problems
from trialfleet.config.service import DEFAULT_IMAGE, TrainingServiceConfig


class OpenpaiConfig(TrainingServiceConfig):
    platform: Literal["openpai"] = "openpai"
    host: str
    username: str
    token: Secret
    trial_cpu_number: int = Field(gt=0)
    trial_memory_size: SizeMB = Field(gt=0)
    storage_config_name: str
    docker_image: str = DEFAULT_IMAGE
    virtual_cluster: str | None = None  # None: the cluster's default virtual cluster
    local_storage_mount_point: ConfigPath
    container_storage_mount_point: str
    reuse_mode: bool = True
    openpai_config: JsonMapping | None = None
    openpai_config_file: ConfigPath | None = None

    @field_validator("host")
    @classmethod
    def _add_scheme(cls, host: str) -> str:
        return host if "://" in host else f"https://{host}"

    _check_mount = field_validator("local_storage_mount_point")(
        existing("directory", "local storage mount point")
    )
    _check_config_file = field_validator("openpai_config_file")(existing("file", "OpenPAI config file"))

    @model_validator(mode="after")
    def _check_openpai(self) -> OpenpaiConfig:
        problems: list[tuple[KeyPath, str]] = []
        if self.trial_gpu_number is None:
            problems.append(
                (("trialGpuNumber",), "required field is missing (OpenPAI jobs need a GPU count)")
            )
        if self.openpai_config is not None and self.openpai_config_file is not None:
            problems.append(
                (("openpaiConfigFile",), "set either openpaiConfig or openpaiConfigFile, not both")
            )
        raise_problems(problems)
        return self
