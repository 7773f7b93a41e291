"""``platform: openpai``: one OpenPAI job per trial attempt (NNI's OpenPAI mode), its files on a shared storage,
mounted on the manager's machine too (``localStorageMountPoint``) or not (then trials report through the relay).

The block has NNI's keys. ``openpaiConfig`` / ``openpaiConfigFile`` give a job protocol of the user's own whose
task roles run the trial; what it states wins, and the block's fields fill only what it leaves out, so the
block's resource, image, cluster and storage fields are required only when the protocol does not state them
(see :func:`~.protocol.template_problems`).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import Field, ValidationInfo, field_validator, model_validator

from trialfleet.config.base import (
    ConfigPath,
    Duration,
    JsonMapping,
    KeyPath,
    Secret,
    SizeMB,
    build_settings,
    existing,
    raise_problems,
)
from trialfleet.config.service import DEFAULT_IMAGE, TrainingServiceConfig
from trialfleet.training_services.openpai.template import mount_point_problem, template_problems

#: OpenPAI's own rule for virtual-cluster names (rest server, ``virtual-cluster`` routes)
VC_NAME = re.compile(r"[A-Za-z0-9_]+")


class OpenpaiConfig(TrainingServiceConfig):
    """``platform: openpai``.

    ``container_storage_mount_point`` unset: where the job mounts the storage, which is OpenPAI's default
    ``/mnt/<storageConfigName>`` unless the user's protocol gives it a ``mountPath``.
    """

    platform: Literal["openpai"] = "openpai"
    """`openpai`."""
    host: str
    """The cluster's address; `https://` is assumed without a scheme."""
    username: str = Field(min_length=1)
    """The OpenPAI user."""
    token: Secret
    """A token of that user (a user token or an application token)."""
    trial_cpu_number: int | None = Field(default=None, gt=0)
    """Each trial's CPUs (required without a job protocol)."""
    trial_memory_size: SizeMB | None = Field(default=None, gt=0)
    """Each trial's memory (required without a job protocol)."""
    storage_config_name: str | None = Field(default=None, min_length=1)
    """The OpenPAI storage jobs mount (required without a job protocol)."""
    docker_image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    """The jobs' image."""
    virtual_cluster: str | None = None  # None: the protocol's, else OpenPAI's default virtual cluster
    """The OpenPAI virtual cluster; default: the protocol's, else `default`."""
    #: None: the storage is not mounted here; jobs carry their files and trials report through the relay
    local_storage_mount_point: ConfigPath | None = None
    """Where this machine mounts that storage; unset: jobs carry their files and trials report through the
    relay."""
    container_storage_mount_point: str | None = None
    """Where jobs see the storage; default `/mnt/<storageConfigName>`."""
    relay_port: int | None = Field(default=None, gt=0, lt=65536)  # None: the manager's port + 1
    """The relay's port, without `localStorageMountPoint`; default: the manager's port + 1."""
    reuse_mode: bool = True  # NNI's default
    """Run trials in long-lived worker jobs, trial after trial (docs/reuse.md); acted on with
    `localStorageMountPoint` and a job of one task, else every trial attempt is a job of its own."""
    worker_idle_timeout: Duration = Field(default=60, gt=0)
    """With `reuseMode`: how long a worker job with no trial is kept before it is released (e.g. `5m`)."""
    openpai_config: JsonMapping | None = None
    """A job protocol of your own, inline."""
    openpai_config_file: ConfigPath | None = None
    """A job protocol of your own, in a YAML file."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"relay_port", "worker_idle_timeout"})
    # nniManagerIp and relayPort are used without localStorageMountPoint only, and reuseMode with it and a job of
    # one task: the service warns otherwise

    @field_validator("host")
    @classmethod
    def _add_scheme(cls, host: str) -> str:
        host = host.strip().rstrip("/")
        if not host:
            raise ValueError("expected the cluster's address, such as 10.1.2.3 or https://pai.example.org")
        if "://" not in host:
            return f"https://{host}"  # NNI's default
        if not host.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// address, got {host!r}")
        return host

    @field_validator("virtual_cluster")
    @classmethod
    def _check_virtual_cluster(cls, name: str | None) -> str | None:
        if name is not None and not VC_NAME.fullmatch(name):
            raise ValueError(f"OpenPAI names virtual clusters with letters, digits and _ only, got {name!r}")
        return name

    @field_validator("container_storage_mount_point")
    @classmethod
    def _check_mount_point(cls, path: str | None) -> str | None:
        if path is None:
            return None
        problem = mount_point_problem(path)
        if problem:
            raise ValueError(problem)
        return posixpath.normpath(path)

    _check_mount = field_validator("local_storage_mount_point")(
        existing("directory", "local storage mount point")
    )
    _check_config_file = field_validator("openpai_config_file")(existing("file", "OpenPAI config file"))

    @model_validator(mode="after")
    def _check_openpai(self, info: ValidationInfo) -> OpenpaiConfig:
        problems: list[tuple[KeyPath, str]] = []
        if self.openpai_config is not None and self.openpai_config_file is not None:
            problems.append(
                (("openpaiConfigFile",), "set either openpaiConfig or openpaiConfigFile, not both")
            )
            raise_problems(problems)
        try:
            protocol = self.user_protocol() if build_settings(info).check_paths else self.openpai_config
        except ValueError as exc:
            raise_problems([(("openpaiConfigFile",), str(exc))])
        if protocol is not None or self.openpai_config_file is None:
            problems += template_problems(self, protocol)
        raise_problems(problems)
        return self

    def user_protocol(self) -> dict[str, Any] | None:
        """The job protocol of ``openpaiConfig`` or ``openpaiConfigFile`` (read now), None without one;
        ValueError when the file cannot be read or is not a YAML mapping."""
        if self.openpai_config is not None:
            return self.openpai_config
        if self.openpai_config_file is None:
            return None
        return read_protocol_file(self.openpai_config_file)


def read_protocol_file(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the OpenPAI config file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"the OpenPAI config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise ValueError(f"the OpenPAI config file {path} does not hold a job protocol (a YAML mapping)")
    return loaded
