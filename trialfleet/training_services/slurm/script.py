"""What is submitted for one trial: the ``sbatch`` command line and the batch script (both golden-file tested).

Every Slurm option travels as its own ``sbatch`` argument, never as an ``#SBATCH`` line: sbatch parses those
lines with rules of its own (``#`` starts a comment, no newline can be written), while an argument reaches it
unchanged. The job's working directory is the trial directory and its output file is named relative to it.
Slurm joins the two and expands ``%`` patterns in the result, unless it contains a backslash, which turns the
expansion off (the backslashes are dropped): so the name is given as ``\\slurm.out``, and a trial directory
that has a backslash of its own, which Slurm would mangle, gets no output file. The script holds only bash;
each value in it is quoted with :func:`shlex.quote`.

The script runs the setup script (module load, conda activate) in the job's own shell, then replaces itself
with the trial keeper. The keeper is thus the batch step's main process: ``scancel --batch`` reaches it
alone, and it ends the trial's process tree and writes result.json before the job ends.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from trialfleet.training_services.batch.launch import KeeperJob, keeper_line, shim_lines
from trialfleet.training_services.naming import nni_job_name

JOB_OUTPUT = "slurm.out"  # Slurm's own messages for the job ("CANCELLED DUE TO TIME LIMIT"), in the trial dir
JOB_ID_FILE = "slurm_job_id"  # written by the job when it starts: finds the job again after MinJobAge
SCRIPT_NAME = "sbatch.sh"
#: options trialfleet sets itself; taking them from sbatchOptions would break how trials are found and read
RESERVED_OPTIONS = frozenset(
    {"--job-name", "-J", "--output", "-o", "--error", "-e", "--chdir", "-D", "--parsable", "--wrap"}
    | {"--array", "-a", "--comment", "--requeue", "--no-requeue", "--input", "-i", "--export"}
)


@dataclass(frozen=True)
class JobResources:
    """Per-trial Slurm options from the config (``None``: the partition's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: int | None = None  # seconds; Slurm counts whole minutes, so it is rounded up
    cpus: int | None = None
    memory_mb: int | None = None
    gpus: int | None = None
    gpu_request_style: str = "gres"  # "gres": --gres=gpu:N, "gpus": --gpus=N
    extra: Sequence[str] = ()  # sbatchOptions, one argument each


@dataclass(frozen=True)
class TrialJob(KeeperJob):
    """One trial attempt as a Slurm job; paths are as the cluster nodes see them."""

    setup_script: str | None = None
    python_path: str | None = None  # a directory put first on PATH (a conda environment's bin)

    @property
    def name(self) -> str:
        return nni_job_name(self.experiment_id, self.trial_id)

    @property
    def comment(self) -> str:
        return job_comment(self.attempt)

    @property
    def directory(self) -> str:
        return self.trial_dir


@dataclass(frozen=True)
class WorkerJob:
    """A reuse-mode worker as a Slurm job (:mod:`..batch.reuse`); paths are as the cluster nodes see them."""

    experiment_id: str
    worker: str  # the worker's name
    worker_dir: str
    argv: Sequence[str]  # the worker's command line (batch.reuse.worker_argv)
    shim_dir: str
    setup_script: str | None = None
    python_path: str | None = None

    @property
    def name(self) -> str:
        return f"nni_exp_{self.experiment_id}_worker_{self.worker}"

    comment = "trialfleet worker"

    @property
    def directory(self) -> str:
        return self.worker_dir


def job_comment(attempt: int) -> str:
    """Told apart by the comment: every attempt of a trial has the same job name."""
    return f"trialfleet attempt {attempt}"


def reserved_options(options: Sequence[str]) -> list[str]:
    """The sbatchOptions entries that name an option trialfleet sets itself."""
    return [option for option in options if option.split("=", 1)[0].strip() in RESERVED_OPTIONS]


def sbatch_argv(job: TrialJob | WorkerJob, resources: JobResources, script_path: str) -> list[str]:
    argv = ["sbatch", "--parsable", f"--job-name={job.name}", f"--comment={job.comment}"]
    output = "/dev/null" if "\\" in job.directory else f"\\{JOB_OUTPUT}"
    argv += [f"--chdir={job.directory}", f"--output={output}", "--no-requeue"]
    for option, value in (
        ("--partition", resources.partition),
        ("--account", resources.account),
        ("--qos", resources.qos),
    ):
        if value is not None:
            argv.append(f"{option}={value}")
    if resources.time_limit is not None:
        argv.append(f"--time={math.ceil(resources.time_limit / 60)}")
    if resources.cpus is not None:
        argv.append(f"--cpus-per-task={resources.cpus}")
    if resources.memory_mb is not None:
        argv.append(f"--mem={resources.memory_mb}M")
    if resources.gpus:
        style = resources.gpu_request_style
        argv.append(f"--gpus={resources.gpus}" if style == "gpus" else f"--gres=gpu:{resources.gpus}")
    return [*argv, *resources.extra, script_path]


def sbatch_script(job: TrialJob) -> str:
    what = f"trial {job.trial_id}, attempt {job.attempt}"
    lines = [*_prologue(job, what), "exec " + keeper_line(job.env, job.keeper, shlex.quote(job.trial_dir))]
    return "\n".join(lines) + "\n"


def worker_script(job: WorkerJob) -> str:
    """The script of a worker job: the same setup as a trial's job, then the worker in place of the keeper."""
    lines = [*_prologue(job, f"worker {job.worker} (reuse mode)"), "exec " + shlex.join(job.argv)]
    return "\n".join(lines) + "\n"


def _prologue(job: TrialJob | WorkerJob, what: str) -> list[str]:
    q = shlex.quote
    lines = [
        "#!/bin/bash",
        f"# trialfleet: {what}, of experiment {job.experiment_id}.",
        "# Submitted with sbatch by the trialfleet manager; the options are on its command line.",
        f'printf "%s\\n" "$SLURM_JOB_ID" > {q(job.directory + "/" + JOB_ID_FILE)}',
    ]
    if job.setup_script:
        lines += ["# --- setupScript ---", job.setup_script.rstrip("\n"), "# --- end of setupScript ---"]
    if job.python_path:
        lines.append(f'export PATH={q(job.python_path)}:"$PATH"')
    return lines + shim_lines(job.shim_dir)
