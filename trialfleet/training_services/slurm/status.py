"""Slurm's view of trial jobs: the state table, squeue/sacct parsing, how a trial ended, and the job watcher.

The keeper's ``result.json`` decides how a trial ended whenever it exists; Slurm's state only fills in what the
keeper could not say (node failure, time limit, preemption, a job cancelled before it started). Everything
here but :class:`JobWatcher` is a pure function of its arguments; the rules every batch platform shares are
in :mod:`..batch`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import RESULT_GRACE, JobRecord, JobView, OutcomeTable
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning, state_meaning
from trialfleet.training_services.job_states import failed as _failed
from trialfleet.training_services.job_states import running as _running
from trialfleet.training_services.job_states import waiting as _waiting
from trialfleet.training_services.slurm.runner import CommandRunner
from trialfleet.training_services.trial_dir import ended_from_result

SQUEUE_FORMAT = "JobID:|,State:|,exit_code:|,Reason:|"  # the reason last: it is free text
SACCT_FORMAT = "JobIDRaw,State,ExitCode,Reason"
#: how long an ended job may go without result.json showing up on the shared directory (RESULT_GRACE) when the keeper exited by itself, so it must have written result.json before
RESULT_GRACE_AFTER_KEEPER_EXIT = 60.0


SLURM_STATES: Mapping[str, StateMeaning] = {
    "PENDING": _waiting("waiting in the Slurm queue"),
    "CONFIGURING": _waiting("nodes allocated, getting ready"),
    "REQUEUED": _waiting("requeued by Slurm"),
    "REQUEUE_HOLD": _waiting("requeued and held"),
    "REQUEUE_FED": _waiting("requeued by the federation"),
    "RESV_DEL_HOLD": _waiting("held: its reservation was deleted"),
    "RUNNING": _running("running"),
    "COMPLETING": _running("completing"),
    "SIGNALING": _running("being signalled"),
    "STAGE_OUT": _running("staging out files"),
    "RESIZING": _running("changing size"),
    "SUSPENDED": _running("suspended"),
    "STOPPED": _running("stopped with SIGSTOP"),
    "COMPLETED": StateMeaning(TrialStatus.SUCCEEDED, None, "the job completed"),
    "FAILED": _failed(USER, "the job failed"),
    "CANCELLED": StateMeaning(
        TrialStatus.USER_CANCELED, FailureKind.CANCELED, "cancelled with scancel outside trialfleet"
    ),
    "TIMEOUT": StateMeaning(TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT, "reached its Slurm time limit"),
    "DEADLINE": StateMeaning(TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT, "reached its Slurm deadline"),
    "NODE_FAIL": _failed(INFRA, "a node of the job failed"),
    "PREEMPTED": _failed(INFRA, "preempted by Slurm"),
    "BOOT_FAIL": _failed(INFRA, "its node failed to boot"),
    "REVOKED": _failed(INFRA, "revoked: a sibling job started on another cluster"),
    # the trial used more memory than it asked for: running it again the same way fails the same way
    "OUT_OF_MEMORY": _failed(USER, "out of memory: the trial used more than the memory it requested"),
    "SPECIAL_EXIT": _failed(USER, "held by Slurm in SPECIAL_EXIT after its exit code"),
}


def slurm_state_meaning(state: str) -> StateMeaning:
    """A Slurm job state (squeue's ``RUNNING``, sacct's ``CANCELLED by 1000`` or ``CANCELLED+``) → ours."""
    return state_meaning(SLURM_STATES, normalise_state(state), "Slurm job state")


def normalise_state(state: str) -> str:
    words = state.split()
    return words[0].rstrip("+").upper() if words else ""


@dataclass(frozen=True)
class SlurmJob(JobRecord):
    job_id: str
    state: str  # normalised: "CANCELLED", never "CANCELLED by 0"
    reason: str | None = None  # "Resources", "Priority", "TimeLimit"; None for Slurm's "None"
    exit_code: int | None = None  # set when the batch script exited by itself
    signal: int | None = None  # set when it was killed by a signal

    @property
    def meaning(self) -> StateMeaning:
        return slurm_state_meaning(self.state)

    def describe(self) -> str:
        """``Slurm job 12 FAILED, signal 9`` for messages."""
        parts = [f"Slurm job {self.job_id} {self.state}"]
        if self.signal:
            parts.append(f"signal {self.signal}")
        elif self.exit_code:
            parts.append(f"exit code {self.exit_code}")
        if self.reason:
            parts.append(f"reason {self.reason}")
        return ", ".join(parts)


def parse_squeue(out: str) -> dict[str, SlurmJob]:
    """Lines of ``squeue --noheader --Format=<SQUEUE_FORMAT>``; ``exit_code`` is a raw wait status there."""
    jobs: dict[str, SlurmJob] = {}
    for line in out.splitlines():
        fields = line.removesuffix("|").split("|", 3)
        if len(fields) != 4 or not fields[0].strip():
            continue
        job_id, state, status, reason = (field.strip() for field in fields)
        raw = int(status) if status.isdigit() else 0
        signal, code = raw & 0x7F, (raw >> 8) & 0xFF
        jobs[job_id] = SlurmJob(
            job_id, normalise_state(state), _reason(reason), None if signal else code, signal or None
        )
    return jobs


def parse_sacct(out: str) -> dict[str, SlurmJob]:
    """Lines of ``sacct --noheader --parsable2 --allocations --format=<SACCT_FORMAT>``; ExitCode is ``code:signal``."""
    jobs: dict[str, SlurmJob] = {}
    for line in out.splitlines():
        fields = line.split("|", 3)
        if len(fields) != 4 or not fields[0].strip().isdigit():
            continue  # job steps (12.batch) are left out by --allocations; anything else is not ours
        job_id, state, exit_status, reason = (field.strip() for field in fields)
        code, _, signal = exit_status.partition(":")
        number = int(signal) if signal.isdigit() else 0
        exit_code = None if number else (int(code) if code.isdigit() else None)
        jobs[job_id] = SlurmJob(job_id, normalise_state(state), _reason(reason), exit_code, number or None)
    return jobs


def _reason(text: str) -> str | None:
    return None if text in ("", "None", "(null)") else text


def accounting_enabled(scontrol_config: str) -> bool:
    """From ``scontrol show config``: whether a job accounting database answers sacct."""
    for line in scontrol_config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() not in ("", "accounting_storage/none")
    return False


def result_grace(job: SlurmJob, keeper_started: bool) -> float:
    """How long to wait for result.json after Slurm says the job ended (see the constants)."""
    if keeper_started and job.signal is None and job.exit_code in (0, 1):
        return RESULT_GRACE_AFTER_KEEPER_EXIT
    return RESULT_GRACE


class SlurmOutcomes(OutcomeTable[SlurmJob]):
    gone_reason = "the Slurm job is gone"
    log_hint = "see slurm.out"

    def from_result(
        self, trial_id: str, result: Mapping[str, Any], view: JobView[SlurmJob]
    ) -> TrialEnded | None:
        job = view.job
        if not result.get("canceled") or view.cancel_status is not None or job is None:
            return ended_from_result(trial_id, result, view.cancel_status)
        # the keeper was signalled, not by us: by Slurm (time limit, preemption, scancel) or by hand
        if not job.ended:
            return None  # Slurm will say why soon
        if self.exited(job):
            return ended_from_result(trial_id, result)  # someone signalled the keeper itself
        return self.job_ended(trial_id, job, result.get("exit_code"))

    def exited(self, job: SlurmJob) -> bool:
        return job.state in ("COMPLETED", "FAILED")

    def exit_code(self, job: SlurmJob) -> int | None:
        return job.exit_code

    def never_started(self, trial_id: str, job: SlurmJob) -> TrialEnded:
        if job.reason == "JobLaunchFailure":  # Slurm could not start the batch script at all
            message = f"Slurm could not launch the job ({job.describe()}); see the slurmd log"
            return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, INFRA)
        return super().never_started(trial_id, job)


SLURM_OUTCOMES = SlurmOutcomes()


#: how the trial ended, or None while that is not known yet (see SLURM_OUTCOMES's class)
trial_outcome = SLURM_OUTCOMES.decide


class JobWatcher(BatchJobWatcher[SlurmJob]):
    """The one place that asks Slurm about jobs: one batched squeue for every live job when a query is due
    (then sacct for those squeue forgot, where the cluster has accounting); see :mod:`..batch.watcher`."""

    platform = "slurm"

    def __init__(self, runner: CommandRunner, *, use_sacct: bool, **pacing: Any) -> None:
        super().__init__(**pacing)
        self.runner = runner
        self.use_sacct = use_sacct

    async def query(self, job_ids: Iterable[str]) -> dict[str, SlurmJob]:
        """One squeue for all ``job_ids`` (finished ones too, until MinJobAge), then sacct for the rest."""
        ids = sorted(set(job_ids), key=int)
        result = await self.runner.run(
            ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}", f"--Format={SQUEUE_FORMAT}"]
        )
        # asked about jobs that are all purged already, squeue fails instead of printing nothing
        if result.code != 0 and "Invalid job id" not in result.err:
            raise PlatformError(f"squeue failed (exit {result.code}): {result.err.strip()}")
        found = parse_squeue(result.out) if result.code == 0 else {}
        missing = [job for job in ids if job not in found]
        if missing and self.use_sacct:
            found.update(await self._sacct(missing))
        return found

    async def _sacct(self, job_ids: list[str]) -> dict[str, SlurmJob]:
        jobs, fields = f"--jobs={','.join(job_ids)}", f"--format={SACCT_FORMAT}"
        result = await self.runner.run(["sacct", "--noheader", "--parsable2", "--allocations", jobs, fields])
        if result.code != 0:
            raise PlatformError(f"sacct failed (exit {result.code}): {result.err.strip()}")
        return parse_sacct(result.out)
