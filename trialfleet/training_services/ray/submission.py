"""What is submitted for one trial attempt: the arguments of ``JobSubmissionClient.submit_job`` (golden-file tested).

The submission id is ``nni_exp_<experiment>_trial_<trial>_attempt_<n>``: Ray refuses a second job of the same
id, so submitting an attempt twice never runs it twice. The metadata names experiment, trial and attempt, so a
restarted manager finds its jobs in ``ray job list``. The working directory is the package of the code and the
support bundle (``package.py``). The entrypoint runs ``entry.py`` there with the trial's payload — its command,
parameter record and environment — as one JSON argument, quoted for the shell Ray runs it with; the payload is
ASCII, so no byte of a hostile value reaches the shell unquoted. Resources go to ``entrypoint_*``, so Ray
places the trial on a node that has them, and keeps it PENDING while none has.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.compat import REAL_NNI_PROBE
from trialfleet.training_services.environment import CHANNEL_VARIABLES, gpu_variables
from trialfleet.training_services.naming import attempt_name, nni_job_name
from trialfleet.training_services.spec import TrialSpec
from trialfleet.training_services.trial_dir import PARAMETER_FILE, STALE_RECORDS, command_record

METADATA_EXPERIMENT = "trialfleet_experiment"
METADATA_TRIAL = "trialfleet_trial"
METADATA_ATTEMPT = "trialfleet_attempt"
#: Ray's stop sends SIGTERM and SIGKILL after RAY_JOB_STOP_WAIT_TIME_S (3 s by default): the keeper must have
#: ended the trial's tree and written result.json before that
KILL_GRACE = 2.0


@dataclass(frozen=True)
class Resources:
    """What each trial's job reserves (``None``: not asked for)."""

    cpus: float | None = None
    gpus: int | None = None
    memory_mb: int | None = None
    custom: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ShippedPaths:
    """Where entry.py, the keeper and the ``nni`` shim are, relative to the job's working directory."""

    entry: str
    keeper: str
    shim: str


@dataclass(frozen=True)
class JobRequest:
    submission_id: str
    entrypoint: str
    runtime_env: Mapping[str, Any]
    metadata: Mapping[str, str]
    resources: Resources

    def kwargs(self) -> dict[str, Any]:
        """``submit_job``'s keyword arguments (None: left to Ray)."""
        resources = self.resources
        return {
            "submission_id": self.submission_id,
            "entrypoint": self.entrypoint,
            "runtime_env": json.loads(json.dumps(self.runtime_env)),  # the client changes it in place
            "metadata": dict(self.metadata),
            "entrypoint_num_cpus": resources.cpus,
            "entrypoint_num_gpus": resources.gpus,
            "entrypoint_memory": None if resources.memory_mb is None else resources.memory_mb * 1024 * 1024,
            "entrypoint_resources": dict(resources.custom) or None,
        }


def submission_id(experiment_id: str, spec: TrialSpec) -> str:
    """ValueError for an experiment or trial id that cannot be part of a job name."""
    return f"{nni_job_name(experiment_id, spec.trial_id)}_attempt_{spec.attempt}"


def payload(experiment_id: str, spec: TrialSpec, node_directory: str | None) -> dict[str, Any]:
    """What entry.py needs of this trial on the node; its trial directory is only known there."""
    env = {
        "NNI_PLATFORM": "ray",
        "NNI_EXP_ID": experiment_id,
        "NNI_TRIAL_JOB_ID": spec.trial_id,
        "NNI_TRIAL_SEQ_ID": str(spec.sequence_id),
        **spec.env,
        **gpu_variables(spec.gpu_number, None),  # Ray sets the variable for the GPUs it gives
    }
    command = command_record(["/bin/bash", "-c", spec.command], "", None, kill_grace=KILL_GRACE)
    for known_on_the_node in ("cwd", "env", "env_unset"):  # entry.py fills these in
        del command[known_on_the_node]
    return {
        "experiment": experiment_id,
        "attempt": attempt_name(spec.trial_id, spec.attempt),
        "trial_root": node_directory,
        "files": {PARAMETER_FILE: spec.parameter_record},
        "command": command,
        "env": env,
    }


def shipped_settings(paths: ShippedPaths) -> dict[str, Any]:
    """What entry.py needs of every trial alike: shipped beside it in the package, as ``settings.json``."""
    return {
        "keeper": paths.keeper,
        "shim": paths.shim,
        "unset": list(CHANNEL_VARIABLES),
        "stale": list(STALE_RECORDS),
        "real_nni_probe": REAL_NNI_PROBE,
    }


def job_request(
    experiment_id: str,
    spec: TrialSpec,
    *,
    working_dir: str,
    paths: ShippedPaths,
    resources: Resources,
    runtime_env: Mapping[str, Any] | None = None,
    node_directory: str | None = None,
) -> JobRequest:
    arguments = json.dumps(payload(experiment_id, spec, node_directory), sort_keys=True)
    metadata = {
        METADATA_EXPERIMENT: experiment_id,
        METADATA_TRIAL: spec.trial_id,
        METADATA_ATTEMPT: str(spec.attempt),
    }
    return JobRequest(
        submission_id=submission_id(experiment_id, spec),
        entrypoint=f"exec python3 -I -S {shlex.quote(paths.entry)} {shlex.quote(arguments)}",
        runtime_env={**(runtime_env or {}), "working_dir": working_dir},
        metadata=metadata,
        resources=resources,
    )
