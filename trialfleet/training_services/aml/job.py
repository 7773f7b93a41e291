"""What is submitted for one trial attempt: an Azure ML command job (golden-file tested as :func:`job_spec`).

The job runs the uploaded code snapshot — the trial's code directory plus ``.trialfleet/`` (the keeper, the
``nni`` shim and the forwarder) — with the forwarder as its command. Everything of the trial travels in the
job's environment variables, never in the command line: NNI's variables, the trial's own, its parameters
(``TRIALFLEET_AML_PARAMETERS``, the exact content of ``parameter.cfg``) and its command
(``TRIALFLEET_AML_COMMAND``, run with ``bash -c`` by the keeper), so no value needs quoting for a shell.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.training_services.environment import gpu_variables
from trialfleet.training_services.naming import nni_job_name

SUPPORT_DIR = ".trialfleet"  # in the code snapshot
FORWARDER = f"{SUPPORT_DIR}/forwarder.py"
COMMAND = f"python3 -I -S {FORWARDER} {SUPPORT_DIR}"
WORKER_RELAY = f"{SUPPORT_DIR}/worker_relay.py"  # a reuse-mode worker job's command (worker_command)
_AML_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{2,254}")


def job_name(experiment_id: str, trial_id: str, attempt: int) -> str:
    """NNI's ``nni_exp_<experiment>_trial_<trial>`` (``_attempt_<n>`` from the second attempt on) in lower case.

    Azure ML keeps job names in lower case (the SDK lowercases the name it creates a job with, but not the one it
    reads a job by), so a name with capitals gets a digest of the original, which tells ``aBc`` from ``abc``. A
    trial id Azure ML would refuse gets a uuid derived from the same parts.
    """
    name = nni_job_name(experiment_id, trial_id)
    name = name if attempt == 0 else f"{name}_attempt_{attempt}"
    if name != name.lower():
        name = f"{name.lower()}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    if _AML_NAME.fullmatch(name):
        return name
    return "nni_" + uuid.uuid5(uuid.NAMESPACE_URL, f"trialfleet/{experiment_id}/{trial_id}/{attempt}").hex


def experiment_name(name: str | None, experiment_id: str) -> str:
    """Azure ML's experiment for the trials: the experiment's name in the characters Azure ML accepts."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name or "").strip("_")[:200]
    return cleaned or f"trialfleet_{experiment_id}"


@dataclass(frozen=True)
class TrialJob:
    name: str
    trial_id: str
    experiment: str  # Azure ML's experiment name
    compute: str
    image: str
    env: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    command: str = COMMAND  # a trial attempt's; a worker job's is worker_command's


def worker_job_name(experiment_id: str, worker: str) -> str:
    """A reuse-mode worker job: ``nni_exp_<experiment>_worker_<name>`` (the worker names are unique per
    experiment), in the characters Azure ML accepts."""
    name = f"nni_exp_{experiment_id}_worker_{worker}"
    if name == name.lower() and _AML_NAME.fullmatch(name):
        return name
    return "nni_" + uuid.uuid5(uuid.NAMESPACE_URL, f"trialfleet/{experiment_id}/worker/{worker}").hex


def worker_command(idle_timeout: float) -> str:
    """The worker job's command: the worker, its mailbox carried over MLflow (``worker_relay.py``); it ends
    itself after ``idle_timeout`` seconds without a trial."""
    return f"python3 -I -S {WORKER_RELAY} {SUPPORT_DIR} {idle_timeout:g}"


def trial_variables(
    nni: Mapping[str, str], spec_env: Mapping[str, str], parameters: str, command: str, gpu_number: int | None
) -> dict[str, str]:
    """The job's environment: NNI's variables, the trial's own, then what the forwarder needs."""
    env = {**nni, **spec_env, **gpu_variables(gpu_number, None)}
    env["TRIALFLEET_AML_PARAMETERS"] = parameters
    env["TRIALFLEET_AML_COMMAND"] = command
    return env


def job_spec(job: TrialJob) -> dict[str, Any]:
    """The keywords of ``azure.ai.ml.command`` for the job (the code snapshot and the image added by the caller)."""
    return {
        "name": job.name,
        "display_name": job.trial_id,
        "experiment_name": job.experiment,
        "command": job.command,
        "compute": job.compute,
        "environment_variables": dict(job.env),
        "tags": dict(job.tags),
    }


def command_job(job: TrialJob, code: str) -> Any:
    """The SDK's command job, with the code snapshot to upload (the SDK uploads a snapshot once per content)."""
    from azure.ai.ml import command
    from azure.ai.ml.entities import Environment

    return command(code=code, environment=Environment(image=job.image), **job_spec(job))
