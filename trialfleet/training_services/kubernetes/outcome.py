"""How a trial on Kubernetes ended, from its primary replica's final record and its resource's state (pure).

The keeper's ``result.json`` (of the primary replica: docs/kubernetes.md) decides whenever it exists and the
job agrees that it is over; the job fills in what the keeper could not say: another replica failed, the job
was stopped or deleted outside trialfleet, the platform failed a pod, the keeper never started.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.kubernetes.states import JobState
from trialfleet.training_services.trial_dir import cut_short, ended_from_result, lost


@dataclass(frozen=True)
class TrialView:
    """Everything known of one trial at one poll (times are judged by the service, which has a clock)."""

    result: Mapping[str, Any] | None  # the primary replica's result.json
    job: JobState | None  # None: not known (not seen yet, or the API server does not answer)
    gone: bool  # the resource is confirmed deleted
    problem: str | None = None  # a pod the platform failed (states.pod_problem)
    keeper_started: bool = False  # the primary replica's keeper.json exists
    cancel_status: TrialStatus | None = None  # trialfleet cancelled it
    cancel_overdue: bool = False  # cancelled long ago, its record is there, the resource still is too
    settled: bool = False  # the job ended long enough ago for result.json to be visible on the storage
    primary_overdue: bool = False  # the primary ended long ago and the job still runs other replicas


def trial_outcome(trial_id: str, view: TrialView) -> TrialEnded | None:
    """How the trial ended, or None while that is not known yet."""
    if view.cancel_status is not None:
        if not view.gone and not (view.result is not None and view.cancel_overdue):
            return None
        if view.result is not None:  # canceled, or ended by itself just before
            return ended_from_result(trial_id, view.result, view.cancel_status)
        return TrialEnded(trial_id, view.cancel_status, time.time(), None, "canceled", FailureKind.CANCELED)
    if view.result is not None:
        return _from_result(trial_id, view.result, view)
    if view.gone:
        return lost(trial_id, "lost: its resource is gone and the trial keeper left no final record")
    if view.problem is not None:
        return TrialEnded(
            trial_id, TrialStatus.FAILED, time.time(), None, view.problem, FailureKind.INFRASTRUCTURE
        )
    job = view.job
    if job is None or not job.ended or not view.settled:
        return None
    if job.status is TrialStatus.USER_CANCELED:  # stopped outside trialfleet
        return _ended(trial_id, job, f"canceled outside trialfleet: {job.reason}")
    if view.keeper_started:
        return lost(trial_id, f"lost: the trial keeper left no final record ({job.reason})")
    if job.status is TrialStatus.SUCCEEDED:
        message = "the job ended before the trial keeper started; see its pods' logs"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, FailureKind.USER_CODE)
    return _ended(trial_id, job, f"{job.reason}; the trial keeper did not start, see its pods' logs")


def _from_result(trial_id: str, result: Mapping[str, Any], view: TrialView) -> TrialEnded | None:
    job = view.job
    signalled = bool(result.get("canceled"))  # not by trialfleet: by the platform, or by hand
    if view.gone or job is None:
        return ended_from_result(trial_id, result) if view.gone else None
    if not job.ended:
        if signalled:
            return None  # the job's status says why soon (or, restartable, its replicas start again)
        return ended_from_result(trial_id, result) if view.primary_overdue else None
    if signalled:
        if job.status is TrialStatus.SUCCEEDED:  # another replica or role ended the job first
            return cut_short(trial_id, result, job.reason)
        return _ended(trial_id, job, job.reason, result.get("exit_code"))
    ended = ended_from_result(trial_id, result)
    if ended.status is TrialStatus.SUCCEEDED and job.status is not TrialStatus.SUCCEEDED:
        return _ended(trial_id, job, f"the trial succeeded, but its job did not: {job.reason}", 0)
    return ended


def _ended(trial_id: str, job: JobState, message: str, exit_code: int | None = None) -> TrialEnded:
    return TrialEnded(trial_id, job.status, time.time(), exit_code, message, job.failure_kind)
