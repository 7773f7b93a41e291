"""What is submitted for one trial attempt: the job protocol (golden-file tested), its commands and the task script.

The job protocol is OpenPAI's protocolVersion 2, posted as YAML text. Without ``openpaiConfig`` it is NNI's: one
task role ``taskrole``, one instance of the configured image and resources, no retries, the storage mounted. With
one, it is the user's protocol, name and commands replaced, its retries turned off (a trial attempt runs once:
trialfleet's ``maxTrialRetries`` decides, in a fresh trial directory), and the block's fields filling only what it
leaves out (:func:`job_template`).

Each task's commands only check that the trial directory is on the storage and run the task script written
there, ``openpai-task.sh``: every value of the trial (its command, environment, code directory) stays in files on
the storage, quoted for bash, and never passes through OpenPAI's ``<% %>`` templates or its YAML. The script runs
the trial keeper in the trial directory — the first task of the first role — or, for the job's other tasks, in a
directory of their own under ``tasks/``; then it exits with the trial's own exit status, so that OpenPAI's job
state and exit diagnostics tell what the trial did.
"""

from __future__ import annotations

import copy
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from trialfleet.compat import REAL_NNI_PROBE
from trialfleet.config.base import KeyPath
from trialfleet.training_services.environment import CHANNEL_VARIABLES
from trialfleet.training_services.naming import nni_job_name

if TYPE_CHECKING:
    from trialfleet.training_services.openpai.config import OpenpaiConfig

NNI_ROLE = "taskrole"
NNI_IMAGE = "docker_image_0"
TASK_SCRIPT = "openpai-task.sh"
TASKS_DIR = "tasks"  # the keeper directories of a job's tasks other than the first
#: exit status of a task whose trial directory is not on the storage (OpenPAI reports it as the task's)
STORAGE_MISSING_EXIT = 3
STORAGE_MISSING = "is not on storage"  # in the message the task prints then
JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESOURCES = (("cpu", "trialCpuNumber"), ("memoryMB", "trialMemorySize"), ("gpu", "trialGpuNumber"))

#: run by the task script after the keeper: the trial's exit status from result.json, and on a failure the
#: keeper's reason and the tail of the trial's stderr on the task's stderr (OpenPAI's diagnostics read it)
RESULT_EXIT = """\
import json, os, sys
task_dir = sys.argv[1]
try:
    with open(os.path.join(task_dir, "result.json")) as f:
        result = json.load(f)
except (OSError, ValueError) as exc:
    sys.stderr.write("trialfleet: the trial keeper left no result.json: %s\\n" % exc)
    sys.exit(1)
code, signo = result.get("exit_code"), result.get("signal")
status = code if isinstance(code, int) else 128 + signo if isinstance(signo, int) else 1
if status:
    sys.stderr.write("trialfleet: the trial ended: %s\\n" % result.get("reason"))
    try:
        with open(os.path.join(task_dir, "trial.stderr"), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            sys.stderr.write(f.read().decode("utf-8", "replace"))
    except OSError:
        pass
sys.exit(status)
"""


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


def template_problems(config: OpenpaiConfig, protocol: Mapping[str, Any] | None) -> list[tuple[KeyPath, str]]:
    return job_template(config, protocol)[1]


def job_template(
    config: OpenpaiConfig, protocol: Mapping[str, Any] | None
) -> tuple[JobTemplate | None, list[tuple[KeyPath, str]]]:
    """The template from the block and the user's protocol (None: NNI's protocol), or the problems found."""
    if protocol is None:
        return _nni_template(config)
    return _user_template(config, protocol)


def _nni_template(config: OpenpaiConfig) -> tuple[JobTemplate | None, list[tuple[KeyPath, str]]]:
    values = {"cpu": config.trial_cpu_number, "memoryMB": config.trial_memory_size}
    values["gpu"] = config.trial_gpu_number
    missing = [(key,) for field_name, key in _RESOURCES if values[field_name] is None]
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
    config: OpenpaiConfig, given: Mapping[str, Any]
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
    config: OpenpaiConfig,
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
    values = {"cpu": config.trial_cpu_number, "memoryMB": config.trial_memory_size}
    values["gpu"] = config.trial_gpu_number
    for key, block_key in _RESOURCES:
        if key not in resources and values[key] is None:
            message = f"required field is missing (the job protocol's {name}.resourcePerInstance.{key} is not set either)"
            checked.problems.append(((block_key,), message))
        elif key not in resources:
            resources[key] = values[key]
        elif (
            values[key] is not None and resources[key] != values[key] and block_key not in checked.overridden
        ):
            checked.overridden.append(block_key)
    if "dockerImage" not in role:
        _add_nni_image(protocol, config.docker_image)
        role["dockerImage"] = NNI_IMAGE
    elif "dockerImage" in config.model_fields_set and "dockerImage" not in checked.overridden:
        checked.overridden.append("dockerImage")
    return " && ".join(commands)  # as NNI joined them


def _add_nni_image(protocol: dict[str, Any], image: str) -> None:
    prerequisites = protocol.setdefault("prerequisites", [])
    if isinstance(prerequisites, list) and not any(
        isinstance(p, dict) and p.get("name") == NNI_IMAGE for p in prerequisites
    ):
        prerequisites.append({"type": "dockerimage", "uri": image, "name": NNI_IMAGE})


def _place_storage(
    config: OpenpaiConfig, protocol: dict[str, Any], where: KeyPath, checked: _Checked
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
    from trialfleet.training_services.openpai.config import mount_point_problem

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


# ---- one trial's job ------------------------------------------------------------------------------------


def job_name(experiment_id: str, trial_id: str, attempt: int) -> str:
    """NNI's job name, ``nni_exp_<experiment>_trial_<trial>``, for a trial's first attempt; ``…_attempt_<n>`` for
    the later ones, since OpenPAI never frees a job name (409 forever). ValueError for a name OpenPAI refuses."""
    name = nni_job_name(experiment_id, trial_id)
    if attempt:
        name += f"_attempt_{attempt}"
    if not JOB_NAME.fullmatch(name):
        raise ValueError(f"OpenPAI job names hold letters, digits, _ and - only (at most 255): {name!r}")
    return name


def job_protocol(
    template: JobTemplate, *, name: str, trial_dir: str, description: str, setup: list[str]
) -> dict[str, Any]:
    """The protocol of one trial attempt's job; ``setup``: the commands each task runs before the task script."""
    given: dict[str, Any] = copy.deepcopy(dict(template.protocol))
    head: dict[str, Any] = {
        key: given.pop(key) for key in ("protocolVersion", "name", "type") if key in given
    }
    given.pop("description", None)  # the trial's own, for OpenPAI's job list
    protocol: dict[str, Any] = {**head, "name": name, "description": description, **given}
    for role in template.role_commands:
        protocol["taskRoles"][role]["commands"] = [*setup, run_command(trial_dir, role)]
    return protocol


def protocol_text(protocol: Mapping[str, Any]) -> str:
    """The YAML text that is posted (``Content-Type: text/yaml``)."""
    return yaml.safe_dump(dict(protocol), sort_keys=False, allow_unicode=True, width=4096)


def run_command(trial_dir: str, role: str) -> str:
    """A task's last command: the task script written into the trial directory."""
    return f"/bin/bash {shlex.quote(posixpath.join(trial_dir, TASK_SCRIPT))} {shlex.quote(role)}"


def storage_check(trial_dir: str, template: JobTemplate) -> str:
    """A task's first command when the manager wrote the trial directory through its own mount: is it there?"""
    script = posixpath.join(trial_dir, TASK_SCRIPT)
    q = shlex.quote
    missing = (
        f"trialfleet: {script} {STORAGE_MISSING} {template.storage} in this container (mounted at "
        f"{template.mount}): is this storage mounted at localStorageMountPoint where the manager runs?"
    )
    return f"test -f {q(script)} || {{ printf '%s\\n' {q(missing)} >&2; exit {STORAGE_MISSING_EXIT}; }}"


@dataclass(frozen=True)
class TaskScript:
    """One trial attempt's task script; paths are as the job's containers see them."""

    experiment_id: str
    trial_id: str
    attempt: int
    job_name: str
    trial_dir: str
    keeper: str
    shim_dir: str
    primary_role: str
    several_tasks: bool  # the job has tasks besides the primary role's first one
    env: Mapping[str, str] = field(default_factory=dict)  # added to the tasks' environment for the trial


def task_script(task: TaskScript) -> str:
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# trialfleet: trial {task.trial_id}, attempt {task.attempt}, of experiment {task.experiment_id}"
        f" (OpenPAI job {task.job_name}).",
        "# Each task of the job runs it from the storage: /bin/bash <trial dir>/openpai-task.sh <task role>",
        f"trial_dir={q(task.trial_dir)}",
        'task_dir="$trial_dir"',
    ]
    if task.several_tasks:
        index = '"${PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX:-0}"'
        lines += [
            f'if [ "${{1:-}}" != {q(task.primary_role)} ] || [ {index} != 0 ]; then',
            f'    task_dir="$trial_dir/{TASKS_DIR}/$1.${{PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX:-0}}"',
            '    mkdir -p "$task_dir/.nni"',
            '    cp "$trial_dir/parameter.cfg" "$task_dir/parameter.cfg"',
            '    cp "$trial_dir/command-$1.json" "$task_dir/command.json"',
            "fi",
        ]
    lines += [
        f"unset {' '.join(CHANNEL_VARIABLES)}",
        "# the nni shim only for a python3 that has no real nni installed",
        f'if [ "$(python3 -c {q(REAL_NNI_PROBE)} 2>/dev/null)" != yes ]; then',
        f'    export PYTHONPATH={q(task.shim_dir)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
        "fi",
    ]
    assignments = " ".join(q(f"{name}={value}") for name, value in task.env.items())
    own_dir = '"NNI_SYS_DIR=$task_dir" "NNI_OUTPUT_DIR=$task_dir"'
    lines += [
        f'env -- {own_dir} {assignments} python3 -I -S {q(task.keeper)} "$task_dir"',
        "keeper=$?",
        'if [ "$keeper" != 0 ]; then exit "$keeper"; fi',
        f'exec python3 -I -S -c {q(RESULT_EXIT)} "$task_dir"',
    ]
    return "\n".join(lines) + "\n"
