"""What is submitted for one trial attempt: the job protocol (golden-file tested), its commands and the task script.

The job protocol is the experiment's template (:mod:`.template`) with the trial's job name and commands, posted as
YAML text. Each task's commands only prepare the trial directory (check it is on the storage, or unpack what the
job carries) and run the task script written there, ``openpai-task.sh``: every value of the trial (its command,
environment, code directory) stays in files, quoted for bash, and never passes through OpenPAI's ``<% %>``
templates or its YAML. The script runs the trial keeper in the trial directory — the first task of the first role
— or, for the job's other tasks, in a directory of their own under ``tasks/``; then it exits with the trial's own
exit status, so that OpenPAI's job state and exit diagnostics tell what the trial did.
"""

from __future__ import annotations

import copy
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from trialfleet.training_services.batch.launch import keeper_line, shim_lines
from trialfleet.training_services.naming import nni_job_name
from trialfleet.training_services.openpai.template import JobTemplate

TASK_SCRIPT = "openpai-task.sh"
TASKS_DIR = "tasks"  # the keeper directories of a job's tasks other than the first
#: exit status of a task whose trial directory is not on the storage (OpenPAI reports it as the task's)
STORAGE_MISSING_EXIT = 3
STORAGE_MISSING = "is not on storage"  # in the message the task prints then
JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")

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
    lines += shim_lines(task.shim_dir)
    own_dir = '"NNI_SYS_DIR=$task_dir" "NNI_OUTPUT_DIR=$task_dir"'
    lines += [
        keeper_line(task.env, task.keeper, '"$task_dir"', before=own_dir),
        "keeper=$?",
        'if [ "$keeper" != 0 ]; then exit "$keeper"; fi',
        f'exec python3 -I -S -c {q(RESULT_EXIT)} "$task_dir"',
    ]
    return "\n".join(lines) + "\n"


def worker_job_name(experiment_id: str, worker: str) -> str:
    """A reuse-mode worker's job: ``nni_exp_<experiment>_worker_<worker>``."""
    name = f"nni_exp_{experiment_id}_worker_{worker}"
    if not JOB_NAME.fullmatch(name):
        raise ValueError(f"OpenPAI job names hold letters, digits, _ and - only (at most 255): {name!r}")
    return name


def worker_task_script(experiment_id: str, job: str, shim_dir: str, argv: list[str]) -> str:
    """The task script of a reuse-mode worker's job (:mod:`..batch.reuse`): the worker in place of the keeper."""
    lines = [
        "#!/bin/bash",
        f"# trialfleet: a reuse-mode worker of experiment {experiment_id} (OpenPAI job {job}).",
        "# The job's task runs it from the storage: /bin/bash <worker dir>/openpai-task.sh <task role>",
        *shim_lines(shim_dir),
        "exec " + shlex.join(argv),
    ]
    return "\n".join(lines) + "\n"
