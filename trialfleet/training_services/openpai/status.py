"""OpenPAI's view of trial jobs: the state table, a job's record, how a trial ended, why it waits.

The keeper's ``result.json`` decides how a trial ended whenever it exists; OpenPAI's job state only fills in what
the keeper could not say (a job stopped outside trialfleet, a pod evicted or its node lost, an image that does not
exist, a job that failed before the keeper started). Everything here is a pure function of its arguments;
:mod:`.watcher` is what asks OpenPAI.

OpenPAI's ``state`` is derived from FrameworkController's state and the attempt's exit code (``convertState``):
WAITING, RUNNING, STOPPING, SUCCEEDED, STOPPED (exit code -210 or -220: a stop was asked for), FAILED (any other
code) and UNKNOWN. A failure's kind comes from the exit spec's ``type`` for its code (``appExitSpec.type``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import RESULT_GRACE, JobView, OutcomeTable
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning
from trialfleet.training_services.openpai.protocol import STORAGE_MISSING, STORAGE_MISSING_EXIT
from trialfleet.training_services.trial_dir import cut_short, cut_short_unrecorded, ended_from_result, lost

#: how long an ended job may go without result.json showing up on the storage when a job that runs the trial alone
#: succeeded after the keeper started: the task script found result.json, so it exists (a job of several tasks
#: may succeed by another task's completion policy, which stops the keeper's task wherever it was)
RESULT_GRACE_AFTER_SUCCESS = 60.0

_FAILURE_KINDS: Mapping[str, FailureKind] = {
    "USER_FAILURE": USER,  # a non-zero exit, an image that does not exist, the container over its memory
    "PLATFORM_FAILURE": INFRA,  # an evicted pod, a lost node, a SIGKILL from outside
    "RESOURCE_ALLOCATION_TIMEOUT": INFRA,
    "UNKNOWN_FAILURE": INFRA,
}


def openpai_state_meaning(
    state: str, exit_code: int | None = None, exit_type: str | None = None
) -> StateMeaning:
    """An OpenPAI job state, with its exit code and the exit spec's type for it, → trialfleet's."""
    if state == "WAITING":
        return StateMeaning(TrialStatus.WAITING, None, "waiting in OpenPAI's queue")
    if state in ("RUNNING", "STOPPING"):
        return StateMeaning(TrialStatus.RUNNING, None, "running" if state == "RUNNING" else "stopping")
    if state == "SUCCEEDED":
        return StateMeaning(TrialStatus.SUCCEEDED, None, "the job succeeded")
    if state == "STOPPED":
        return StateMeaning(TrialStatus.USER_CANCELED, FailureKind.CANCELED, "stopped outside trialfleet")
    if state == "FAILED":
        return _failed(exit_code, exit_type)
    return StateMeaning(TrialStatus.UNKNOWN, None, f"OpenPAI does not know the job's state ({state})")


def _failed(exit_code: int | None, exit_type: str | None) -> StateMeaning:
    if exit_type == "USER_STOP":
        if exit_code == -1004:  # PodDeadlineExceeded: the job's own time limit
            return StateMeaning(TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT, "reached its deadline")
        return StateMeaning(TrialStatus.USER_CANCELED, FailureKind.CANCELED, "stopped outside trialfleet")
    kind = _FAILURE_KINDS.get(exit_type or "")
    if kind is None:  # the exit spec's type unknown: OpenPAI's negative codes are the platform's own
        kind = INFRA if exit_code is None or exit_code < 0 else USER
    return StateMeaning(TrialStatus.FAILED, kind, "the job failed")


@dataclass(frozen=True)
class PaiJob:
    """What OpenPAI last said about one job (a row of the job list, or its detail once it ended)."""

    name: str
    state: str
    sub_state: str | None = None
    exit_code: int | None = None  # appExitCode
    exit_type: str | None = None  # appExitSpec.type (detail only)
    exit_phrase: str | None = None  # appExitSpec.phrase
    user_exit_code: int | None = None  # appExitMessages.runtime.originUserExitCode: the command's own
    user_log: str | None = None  # the end of the failed task's log, as the PAI runtime kept it
    virtual_cluster: str | None = None

    @classmethod
    def from_summary(cls, row: Mapping[str, Any]) -> PaiJob:
        return cls(
            str(row["name"]),
            str(row.get("state")),
            row.get("subState"),
            _int(row.get("appExitCode")),
            virtual_cluster=row.get("virtualCluster"),
        )

    @classmethod
    def from_detail(cls, body: Mapping[str, Any]) -> PaiJob:
        status = body.get("jobStatus") or {}
        spec = status.get("appExitSpec") or {}
        runtime = (status.get("appExitMessages") or {}).get("runtime") or {}
        logs = runtime.get("errorLogs") or {}
        return cls(
            str(body.get("name")),
            str(status.get("state")),
            status.get("subState"),
            _int(status.get("appExitCode")),
            spec.get("type"),
            spec.get("phrase"),
            _int(runtime.get("originUserExitCode")),
            logs.get("user") if isinstance(logs.get("user"), str) else None,
            status.get("virtualCluster"),
        )

    @property
    def meaning(self) -> StateMeaning:
        return openpai_state_meaning(self.state, self.exit_code, self.exit_type)

    @property
    def ended(self) -> bool:
        return self.state in ("SUCCEEDED", "STOPPED", "FAILED")

    @property
    def storage_missing(self) -> bool:
        """The task found no trial directory on the storage (see protocol.storage_check)."""
        return self.user_exit_code == STORAGE_MISSING_EXIT and STORAGE_MISSING in (self.user_log or "")

    def describe(self) -> str:
        """``OpenPAI job nni_exp_x_trial_y FAILED, exit code 255 (PAIRuntimeUnknownFailed)`` for messages."""
        parts = [f"OpenPAI job {self.name} {self.state}"]
        if self.exit_code is not None and self.state != "SUCCEEDED":
            parts.append(
                f"exit code {self.exit_code}" + (f" ({self.exit_phrase})" if self.exit_phrase else "")
            )
        if self.user_exit_code is not None and self.user_exit_code != self.exit_code:
            parts.append(f"command's exit code {self.user_exit_code}")
        return ", ".join(parts)

    def log_tail(self, lines: int = 5) -> str:
        tail = [line for line in (self.user_log or "").splitlines() if line.strip()][-lines:]
        return " | ".join(tail)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def result_grace(job: PaiJob, keeper_started: bool, single_task: bool = True) -> float:
    if keeper_started and single_task and job.state == "SUCCEEDED":
        return RESULT_GRACE_AFTER_SUCCESS
    return RESULT_GRACE


class OpenpaiOutcomes(OutcomeTable[PaiJob]):
    """``single_task``: the job runs the trial alone, so result.json ends it (a job with more tasks ends when
    OpenPAI says so)."""

    gone_reason = "OpenPAI no longer knows the job"

    def __init__(self, single_task: bool) -> None:
        self.single_task = single_task

    def from_result(
        self, trial_id: str, result: Mapping[str, Any], view: JobView[PaiJob]
    ) -> TrialEnded | None:
        ended = self._from_result(trial_id, result, view.job, view.cancel_status)
        if ended is None and view.gone:  # OpenPAI cannot say more: the keeper's record is all there is
            if result.get("canceled") and view.cancel_status is None:
                # signalled from outside, and not a STOP (that shows as STOPPED first): the job's pods were
                # deleted with it, which the retry policy is for
                why = "OpenPAI no longer knows the job and its trial keeper was ended from outside"
                return lost(trial_id, f"lost: {why} ({ended_from_result(trial_id, result).message})")
            return ended_from_result(trial_id, result, view.cancel_status)
        return ended

    def _from_result(
        self, trial_id: str, result: Mapping[str, Any], job: PaiJob | None, cancel_status: TrialStatus | None
    ) -> TrialEnded | None:
        ours = ended_from_result(trial_id, result, cancel_status)
        if cancel_status is not None:
            return ours
        if result.get("canceled"):
            # the keeper was signalled, not by us: the job was stopped in OpenPAI, or its pod evicted or deleted, or
            # another task role finished first and OpenPAI ended the job
            if job is None or not job.ended:
                return None
            if job.state == "SUCCEEDED":
                return cut_short(trial_id, result, job.describe())
            return _job_ended(trial_id, job, job.meaning, True, result)
        if self.single_task:
            return ours
        if job is None or not job.ended:
            return None  # the job's other tasks still run
        if ours.status is TrialStatus.SUCCEEDED and job.state != "SUCCEEDED":
            return _job_ended(trial_id, job, job.meaning, True, result)  # another task failed the job
        return ours

    def settled(self, trial_id: str, job: PaiJob, keeper_started: bool) -> TrialEnded:
        if job.storage_missing:
            where = f"({job.describe()}): {job.log_tail(1)}"
            message = f"the job's task found no trial directory on the storage {where}"
            return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, USER)
        if keeper_started and not self.single_task and job.state == "SUCCEEDED":
            # another task's success ended the job and stopped the keeper's task before the keeper recorded it
            return cut_short_unrecorded(trial_id, job.describe())
        meaning = job.meaning
        users = meaning.failure_kind is USER or meaning.status is TrialStatus.USER_CANCELED
        if keeper_started and not users:
            return lost(trial_id, f"lost: the trial keeper ended without a final record ({job.describe()})")
        if not keeper_started and meaning.status is TrialStatus.SUCCEEDED:
            meaning = StateMeaning(TrialStatus.FAILED, INFRA, "the job ended without running the trial")
        return _job_ended(trial_id, job, meaning, keeper_started)


OUTCOMES = {True: OpenpaiOutcomes(single_task=True), False: OpenpaiOutcomes(single_task=False)}


def trial_outcome(
    trial_id: str, result: Mapping[str, Any] | None, job: PaiJob | None, *, single_task: bool, **view: Any
) -> TrialEnded | None:
    """:class:`OpenpaiOutcomes` for a job that runs the trial alone (``single_task``) or with other tasks."""
    return OUTCOMES[single_task].decide(trial_id, result, job, **view)


def _job_ended(
    trial_id: str,
    job: PaiJob,
    meaning: StateMeaning,
    keeper_started: bool,
    result: Mapping[str, Any] | None = None,
) -> TrialEnded:
    # the trial can write its directory: result.json's exit code as ended_from_result reads it, defensively
    exit_code = ended_from_result(trial_id, result).exit_code if result is not None else job.user_exit_code
    message = f"{meaning.reason} ({job.describe()})"
    if not keeper_started and job.user_log:
        message += f"; before the trial keeper started: {job.log_tail()}"
    return TrialEnded(trial_id, meaning.status, time.time(), exit_code, message, meaning.failure_kind)


def waiting_reason(job: PaiJob, usage: Mapping[str, Any] | None) -> str:
    """Why a WAITING job waits, with its virtual cluster's usage when known."""
    vc = job.virtual_cluster or "default"
    if not usage:
        return f"waiting in OpenPAI's queue (virtual cluster {vc})"
    used, total = usage.get("resourcesUsed") or {}, usage.get("resourcesTotal") or {}
    shown = ", ".join(
        f"{key} {used.get(key, 0)} of {total.get(key, 0)}{unit}"
        for key, unit in (("cpu", ""), ("memory", " MB"), ("gpu", ""))
    )
    return f"waiting for resources in virtual cluster {vc} ({shown} in use)"
