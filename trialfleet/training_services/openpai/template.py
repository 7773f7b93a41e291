"""Every trial's job protocol but for its name and commands: NNI's, or the user's own merged with the block.

Without ``openpaiConfig`` it is NNI's protocol: one task role ``taskrole``, one instance of the configured image and
resources, no retries, the storage mounted at ``containerStorageMountPoint``. With one, it is the user's protocol,
its retries turned off (a trial attempt runs once: trialfleet's ``maxTrialRetries`` decides, in a fresh trial
directory), and the block's fields filling only what it leaves out; each task role runs its own commands, as NNI
ran them. The config model calls :func:`template_problems` to refuse what cannot be used, with key paths.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from trialfleet.config.base import KeyPath

NNI_ROLE = "taskrole"
NNI_IMAGE = "docker_image_0"
ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TemplateSettings(Protocol):
    """What the template reads of an ``openpai`` block: :class:`~.config.OpenpaiConfig`, which checks itself
    with :func:`template_problems` (the config model imports this module, not the other way round)."""

    trial_cpu_number: int | None
    trial_gpu_number: int | None
    trial_memory_size: int | None
    storage_config_name: str | None
    docker_image: str
    virtual_cluster: str | None
    container_storage_mount_point: str | None
    openpai_config: dict[str, Any] | None

    @property
    def model_fields_set(self) -> set[str]: ...


@dataclass(frozen=True)
class JobTemplate:
    """Every trial's job protocol but for its name and commands, and where the job sees the storage."""

    protocol: Mapping[str, Any]
    #: each task role's own commands (a user's protocol, as NNI ran them); None: the role runs trialCommand
    role_commands: Mapping[str, str | None]
    storage: str
    mount: str  # the storage's path in the job's containers
    tasks: int  # task instances in the job
    overridden: tuple[str, ...] = ()  # block keys whose values the user's protocol replaced

    @property
    def primary(self) -> str:
        """The role whose first task runs in the trial directory itself (its metrics are the trial's)."""
        return next(iter(self.role_commands))


@dataclass
class _Checked:
    problems: list[tuple[KeyPath, str]] = field(default_factory=list)
    overridden: list[str] = field(default_factory=list)


def template_problems(
    config: TemplateSettings, protocol: Mapping[str, Any] | None
) -> list[tuple[KeyPath, str]]:
    return job_template(config, protocol)[1]


def job_template(
    config: TemplateSettings, protocol: Mapping[str, Any] | None
) -> tuple[JobTemplate | None, list[tuple[KeyPath, str]]]:
    """The template from the block and the user's protocol (None: NNI's protocol), or the problems found."""
    if protocol is None:
        return _nni_template(config)
    return _user_template(config, protocol)


def _nni_template(config: TemplateSettings) -> tuple[JobTemplate | None, list[tuple[KeyPath, str]]]:
    values = {key: value for key, _, value in _block_resources(config)}
    missing = [(block_key,) for _, block_key, value in _block_resources(config) if value is None]
    if config.storage_config_name is None:
        missing.append(("storageConfigName",))
    if missing:
        why = "required field is missing (unless a job protocol in openpaiConfig or openpaiConfigFile states it)"
        return None, [(path, why) for path in missing]
    storage = str(config.storage_config_name)
    mount = config.container_storage_mount_point or f"/mnt/{storage}"
    problems = _storage_problems(storage)
    role = {
        "instances": 1,
        "completion": {"minFailedInstances": 1, "minSucceededInstances": -1},
        "taskRetryCount": 0,
        "dockerImage": NNI_IMAGE,
        "resourcePerInstance": values,
        "commands": [],
    }
    protocol: dict[str, Any] = {
        "protocolVersion": 2,
        "name": "",
        "type": "job",
        "jobRetryCount": 0,
        "prerequisites": [{"type": "dockerimage", "uri": config.docker_image, "name": NNI_IMAGE}],
        "taskRoles": {NNI_ROLE: role},
        "extras": {"storages": [{"name": storage, "mountPath": mount}], "submitFrom": "trialfleet"},
    }
    if config.virtual_cluster is not None:
        protocol["defaults"] = {"virtualCluster": config.virtual_cluster}
    if problems:
        return None, problems
    return JobTemplate(protocol, {NNI_ROLE: None}, storage, mount, 1), []


def _user_template(
    config: TemplateSettings, given: Mapping[str, Any]
) -> tuple[JobTemplate | None, list[tuple[KeyPath, str]]]:
    where: KeyPath = ("openpaiConfig",) if config.openpai_config is not None else ("openpaiConfigFile",)
    protocol: dict[str, Any] = copy.deepcopy(dict(given))
    checked = _Checked()
    roles = protocol.get("taskRoles")
    if not isinstance(roles, dict) or not roles:
        return None, [((*where, "taskRoles"), "the job protocol needs taskRoles: a mapping of task roles")]
    protocol["jobRetryCount"] = 0
    commands: dict[str, str | None] = {}
    tasks = 0
    for name, role in roles.items():
        path: KeyPath = (*where, "taskRoles", str(name))
        role_commands = _check_role(config, protocol, path, str(name), role, checked)
        if role_commands is not None:
            commands[str(name)] = role_commands
            tasks += role.get("instances") or 1
    storage, mount = _place_storage(config, protocol, where, checked)
    if config.virtual_cluster is not None:
        defaults = protocol.setdefault("defaults", {})
        if not isinstance(defaults, dict):
            checked.problems.append(((*where, "defaults"), "expected a mapping"))
        elif defaults.setdefault("virtualCluster", config.virtual_cluster) != config.virtual_cluster:
            checked.overridden.append("virtualCluster")
    if checked.problems or storage is None or mount is None:
        return None, checked.problems
    return JobTemplate(protocol, commands, storage, mount, tasks, tuple(checked.overridden)), []


def _check_role(
    config: TemplateSettings,
    protocol: dict[str, Any],
    path: KeyPath,
    name: str,
    role: Any,
    checked: _Checked,
) -> str | None:
    """Fill what the role leaves out from the block; the role's own commands (None when it is unusable)."""
    if not ROLE_NAME.fullmatch(name):
        checked.problems.append(
            (path, "OpenPAI names task roles with letters, digits and _ (not first a digit)")
        )
        return None
    if not isinstance(role, dict):
        checked.problems.append((path, "expected a task role (a mapping)"))
        return None
    commands = role.get("commands")
    if not isinstance(commands, list) or not commands or not all(isinstance(c, str) for c in commands):
        checked.problems.append(((*path, "commands"), "expected the role's commands: a list of strings"))
        return None
    instances = role.get("instances", 1)
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        checked.problems.append(((*path, "instances"), "expected a whole number of at least 1"))
        return None
    if "taskRetryCount" in role:
        role["taskRetryCount"] = 0
    resources = role.setdefault("resourcePerInstance", {})
    if not isinstance(resources, dict):
        checked.problems.append(((*path, "resourcePerInstance"), "expected a mapping"))
        return None
    _fill_resources(config, name, resources, checked)
    if "dockerImage" not in role:
        _add_nni_image(protocol, config.docker_image)
        role["dockerImage"] = NNI_IMAGE
    elif "dockerImage" in config.model_fields_set and "dockerImage" not in checked.overridden:
        checked.overridden.append("dockerImage")
    return " && ".join(commands)  # as NNI joined them


def _fill_resources(
    config: TemplateSettings, role: str, resources: dict[str, Any], checked: _Checked
) -> None:
    """A role's cpu, memoryMB and gpu: the protocol's, else the block's, else a problem."""
    for key, block_key, value in _block_resources(config):
        if key not in resources and value is None:
            message = f"required field is missing (the job protocol's {role}.resourcePerInstance.{key} is not set either)"
            checked.problems.append(((block_key,), message))
        elif key not in resources:
            resources[key] = value
        elif value is not None and resources[key] != value and block_key not in checked.overridden:
            checked.overridden.append(block_key)


def _block_resources(config: TemplateSettings) -> list[tuple[str, str, int | None]]:
    """(protocol key, block key, the block's value) of each resource a task role asks for."""
    return [
        ("cpu", "trialCpuNumber", config.trial_cpu_number),
        ("memoryMB", "trialMemorySize", config.trial_memory_size),
        ("gpu", "trialGpuNumber", config.trial_gpu_number),
    ]


def _add_nni_image(protocol: dict[str, Any], image: str) -> None:
    prerequisites = protocol.setdefault("prerequisites", [])
    if isinstance(prerequisites, list) and not any(
        isinstance(p, dict) and p.get("name") == NNI_IMAGE for p in prerequisites
    ):
        prerequisites.append({"type": "dockerimage", "uri": image, "name": NNI_IMAGE})


def _place_storage(
    config: TemplateSettings, protocol: dict[str, Any], where: KeyPath, checked: _Checked
) -> tuple[str | None, str | None]:
    """The storage holding trialfleet's files among the protocol's ``extras.storages`` (added when absent)."""
    extras = protocol.setdefault("extras", {})
    if not isinstance(extras, dict):
        checked.problems.append(((*where, "extras"), "expected a mapping"))
        return None, None
    storages = extras.get("storages")
    if storages is None:
        storages = extras["storages"] = _teamwise_storages(extras)
    if not isinstance(storages, list) or not all(isinstance(s, dict) for s in storages):
        checked.problems.append(((*where, "extras", "storages"), "expected a list of {name, mountPath}"))
        return None, None
    named = [s for s in storages if s.get("name") == config.storage_config_name]
    if config.storage_config_name is not None and not named:
        named = [{"name": config.storage_config_name}]
        storages.append(named[0])
    elif config.storage_config_name is None and len(storages) != 1:
        why = "several storages" if storages else "no storage"
        message = f"required field is missing: the job protocol mounts {why}; name the one mounted here"
        checked.problems.append((("storageConfigName",), message))
        return None, None
    entry = named[0] if named else storages[0]
    storage = str(entry.get("name"))
    wanted = config.container_storage_mount_point
    mount = entry.get("mountPath") or wanted or f"/mnt/{storage}"
    if wanted is not None and mount != wanted:
        message = f"the job protocol mounts storage {storage} at {mount}, not at {wanted}"
        checked.problems.append((("containerStorageMountPoint",), message))
    entry["mountPath"] = mount
    checked.problems += _storage_problems(storage)
    problem = mount_point_problem(str(mount))
    if problem:
        checked.problems.append(((*where, "extras", "storages"), problem))
    return storage, str(mount)


def _teamwise_storages(extras: dict[str, Any]) -> list[Any]:
    """OpenPAI's deprecated ``teamwise_storage`` runtime plugin, as the rest server converts it."""
    for plugin in extras.get("com.microsoft.pai.runtimeplugin") or []:
        if isinstance(plugin, dict) and plugin.get("plugin") == "teamwise_storage":
            names = (plugin.get("parameters") or {}).get("storageConfigNames") or []
            return [{"name": name} for name in names]
    return []


def _storage_problems(storage: str) -> list[tuple[KeyPath, str]]:
    if "<%" in storage:
        return [
            (("storageConfigName",), f"cannot contain '<%' (OpenPAI reads it as a template): {storage!r}")
        ]
    return []


def mount_point_problem(path: str) -> str | None:
    """Why ``path`` cannot be where jobs see the storage; None when it can."""
    if not path.startswith("/"):
        return f"expected an absolute path in the container, got {path!r}"
    if "\0" in path:
        return "a path cannot contain a NUL character"
    if "<%" in path:  # OpenPAI renders job commands as <% %> templates
        return f"cannot contain '<%' (OpenPAI would read it as a template in the job's commands): {path!r}"
    return None
