"""What is submitted for one trial attempt: the dashboard's job body and the launch script (golden-file tested).

The body is the one NNI's ``DLTSJobConfig`` posted, field for field, with three differences. ``jobId`` is chosen
here, derived from the experiment, trial and attempt, so that a manager that restarts before recording a
submit finds its job instead of starting a second one (DLTS refuses a second job of the same id). The
environment is not sent as ``envs`` (the key DLTS's pod template reads; NNI sent ``env``, which DLTS ignores) but
written to the launch script, since DLTS pastes ``envs`` values unquoted into the pod's YAML. And
``cmd`` is a single line that runs ``dlts.sh`` from the trial directory: every value that could need quoting
(the trial's environment, its paths) is in that script, quoted with :func:`shlex.quote`, never in the job
parameters, which DLTS copies verbatim into YAML and shell templates of its own.

The script replaces itself with the trial keeper, so the pod's main process is the keeper: deleting the pod
(a kill) sends it SIGTERM and it ends the trial's process tree and writes result.json.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass
from typing import Any

from trialfleet.training_services.batch.launch import KeeperJob, keeper_line, shim_lines
from trialfleet.training_services.naming import nni_job_name

SCRIPT_NAME = "dlts.sh"
#: the namespace of the job ids chosen here (uuid5 of experiment, trial and attempt)
JOB_ID_NAMESPACE = uuid.UUID("6b1f0e7c-9d0c-5a59-9a55-2f1f3c1c0d15")


def job_name(experiment_id: str, trial_id: str, attempt: int) -> str:
    """NNI's ``nni_exp_<experiment>_trial_<trial>``; a later attempt adds ``_attempt_<n>``."""
    name = nni_job_name(experiment_id, trial_id)
    return name if attempt == 0 else f"{name}_attempt_{attempt}"


def job_id(experiment_id: str, trial_id: str, attempt: int) -> str:
    """The attempt's job id: a uuid like DLTS's own, the same every time this attempt is submitted."""
    return str(uuid.uuid5(JOB_ID_NAMESPACE, f"{experiment_id}/{trial_id}/{attempt}"))


@dataclass(frozen=True)
class TrialJob(KeeperJob):
    """One trial attempt as a DLTS job; paths are as the job's container sees them."""

    @property
    def name(self) -> str:
        return job_name(self.experiment_id, self.trial_id, self.attempt)

    @property
    def job_id(self) -> str:
        return job_id(self.experiment_id, self.trial_id, self.attempt)

    @property
    def script_path(self) -> str:
        return f"{self.trial_dir}/{SCRIPT_NAME}"


@dataclass(frozen=True)
class WorkerJob:
    """A reuse-mode worker as a DLTS job (:mod:`..batch.reuse`); paths are as the job's container sees them."""

    experiment_id: str
    worker: str  # the worker's name
    worker_dir: str
    argv: tuple[str, ...]  # the worker's command line (batch.reuse.worker_argv)
    shim_dir: str

    @property
    def name(self) -> str:
        return f"nni_exp_{self.experiment_id}_worker_{self.worker}"

    @property
    def job_id(self) -> str:
        return str(uuid.uuid5(JOB_ID_NAMESPACE, f"{self.experiment_id}/worker/{self.worker}"))

    @property
    def script_path(self) -> str:
        return f"{self.worker_dir}/{SCRIPT_NAME}"


@dataclass(frozen=True)
class JobSettings:
    """Per-job values from the config."""

    team: str
    email: str
    gpu_type: str
    image: str
    gpus: int = 0
    preemption_allowed: bool = False


def job_body(job: TrialJob | WorkerJob, settings: JobSettings) -> dict[str, Any]:
    """The JSON body of ``POST <dashboard>api/clusters/<cluster>/jobs``."""
    return {
        "jobId": job.job_id,
        "team": settings.team,
        "userName": settings.email,
        "vcName": settings.team,
        "gpuType": settings.gpu_type,
        "jobType": "training",
        "jobtrainingtype": "RegularJob",
        "ssh": False,
        "ipython": False,
        "tensorboard": False,
        "workPath": "",
        "enableworkpath": True,
        "dataPath": "",
        "enabledatapath": False,
        "jobPath": "",
        "enablejobpath": True,
        "mountpoints": [],
        "envs": [],  # NNI's TMPDIR=$HOME/tmp went to "env", which DLTS ignores; sent to "envs" it is not expanded
        "hostNetwork": False,
        "useGPUTopology": False,
        "isPrivileged": False,
        "hostIPC": False,
        "preemptionAllowed": "True" if settings.preemption_allowed else "False",
        "jobName": job.name,
        "resourcegpu": settings.gpus,
        "image": settings.image,
        "cmd": f"bash {shlex.quote(job.script_path)}",
        "interactivePorts": [],
    }


def launch_script(job: TrialJob) -> str:
    """``dlts.sh``: the trial's environment, the ``nni`` shim when needed, then the keeper in its place."""
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# trialfleet: trial {job.trial_id}, attempt {job.attempt}, of experiment {job.experiment_id}.",
        f"# Run by DLTS job {job.job_id} ({job.name}), submitted by the trialfleet manager.",
    ]
    lines += shim_lines(job.shim_dir)
    lines.append("exec " + keeper_line(job.env, job.keeper, q(job.trial_dir)))
    return "\n".join(lines) + "\n"


def worker_script(job: WorkerJob) -> str:
    """A worker job's ``dlts.sh``: the ``nni`` shim when needed, then the worker in place of the keeper."""
    lines = [
        "#!/bin/bash",
        f"# trialfleet: reuse-mode worker {job.worker} of experiment {job.experiment_id}.",
        f"# Run by DLTS job {job.job_id} ({job.name}), submitted by the trialfleet manager.",
        *shim_lines(job.shim_dir),
        "exec " + shlex.join(job.argv),
    ]
    return "\n".join(lines) + "\n"
