"""Ray's view of trial jobs: the state table, how a trial ended, and the job watcher.

The keeper's ``result.json`` (mirrored from the job's log) decides how a trial ended whenever it arrived; Ray's
job state only says what the keeper could not: a runtime environment that could not be set up, a node lost
under the job (its supervisor actor died), a job stopped outside trialfleet, a job the cluster forgot (the head
restarted). Everything here but :class:`JobWatcher` is a pure function of its arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import JobView, OutcomeTable, canceled
from trialfleet.training_services.batch.service import BatchHandle
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning
from trialfleet.training_services.job_states import failed as _failed
from trialfleet.training_services.trial_dir import lost

log = logging.getLogger(__name__)


class RayHandle(BatchHandle):
    """A trial's handle: its job's submission id (which Ray never accepts twice); ``trial_dir`` is its mirror here."""

    submission_id: str


#: (JobStatus, JobErrorType or "") → ours; "" is any error type the table does not name
RAY_STATES: Mapping[tuple[str, str], StateMeaning] = {
    ("PENDING", ""): StateMeaning(TrialStatus.WAITING, None, "waiting for Ray to place the job"),
    ("RUNNING", ""): StateMeaning(TrialStatus.RUNNING, None, "running"),
    ("SUCCEEDED", ""): StateMeaning(TrialStatus.SUCCEEDED, None, "the job succeeded"),
    ("STOPPED", ""): StateMeaning(
        TrialStatus.USER_CANCELED, FailureKind.CANCELED, "stopped outside trialfleet (ray job stop)"
    ),
    ("FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR"): _failed(USER, "the job's entrypoint failed"),
    # the trial never started: the node, its Python or its runtime environment are at fault, not the trial
    ("FAILED", "JOB_ENTRYPOINT_COMMAND_START_ERROR"): _failed(INFRA, "Ray could not start the entrypoint"),
    ("FAILED", "RUNTIME_ENV_SETUP_FAILURE"): _failed(INFRA, "Ray could not set up the runtime environment"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_DIED"): _failed(INFRA, "the job's node or its supervisor died"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT"): _failed(INFRA, "the job did not start in time"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_START_FAILURE"): _failed(INFRA, "Ray could not start the job"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE"): _failed(INFRA, "Ray could not place the job"),
    ("FAILED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"): _failed(INFRA, "the job failed in Ray"),
    ("FAILED", ""): _failed(INFRA, "the job failed in Ray"),
}


def ray_state_meaning(status: str, error_type: str | None = None) -> StateMeaning:
    """A Ray job's ``status`` and ``error_type`` → ours."""
    meaning = RAY_STATES.get((status, error_type or "")) or RAY_STATES.get((status, ""))
    return meaning or StateMeaning(TrialStatus.UNKNOWN, None, f"unknown Ray job status {status!r}")


@dataclass(frozen=True)
class RayJob:
    """What trialfleet reads of a Ray job's details (``JobDetails``)."""

    submission_id: str
    status: str
    error_type: str | None = None
    message: str | None = None
    exit_code: int | None = None  # driver_exit_code
    node_id: str | None = None  # driver_node_id: where the entrypoint runs, once it does
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def meaning(self) -> StateMeaning:
        return ray_state_meaning(self.status, self.error_type)

    @property
    def ended(self) -> bool:
        return self.status in ("STOPPED", "SUCCEEDED", "FAILED")

    @property
    def placed(self) -> bool:
        """The entrypoint was given a node (it may still be setting up there)."""
        return self.node_id is not None or self.status != "PENDING"

    def describe(self) -> str:
        """``Ray job x FAILED (JOB_SUPERVISOR_ACTOR_DIED): <Ray's message>`` for messages."""
        text = f"Ray job {self.submission_id} {self.status}"
        if self.error_type:
            text += f" ({self.error_type})"
        if self.message:
            first = self.message.strip().splitlines()[0] if self.message.strip() else ""
            text += f": {first[:300]}"
        return text


class RayOutcomes(OutcomeTable[RayJob]):
    gone_reason = "Ray no longer knows the job (the head restarted, or the job was deleted)"
    never_started_kind = INFRA
    log_hint = ""

    def without_result(self, trial_id: str, view: JobView[RayJob]) -> TrialEnded | None:
        job = view.job
        if view.cancel_status is not None and (
            view.gone or (job is not None and (job.ended or not job.placed))
        ):
            # a job stopped while still unplaced never runs its trial: Ray stops it as soon as it is placed
            return canceled(trial_id, view.cancel_status)
        if view.gone:
            return lost(trial_id, f"lost: {self.gone_reason}")
        return super().without_result(trial_id, view)

    def exited(self, job: RayJob) -> bool:
        return job.status in ("SUCCEEDED", "FAILED") and job.error_type in (
            None,
            "JOB_ENTRYPOINT_COMMAND_ERROR",
        )

    def exit_code(self, job: RayJob) -> int | None:
        return job.exit_code

    def job_ended(self, trial_id: str, job: RayJob, exit_code: int | None = None) -> TrialEnded:
        meaning = job.meaning
        message = f"{meaning.reason}: {job.describe()}"
        return TrialEnded(trial_id, meaning.status, time.time(), exit_code, message, meaning.failure_kind)


RAY_OUTCOMES = RayOutcomes()


def trial_outcome(
    trial_id: str, result: Mapping[str, Any] | None, job: RayJob | None, *, drained: bool, **view: Any
) -> TrialEnded | None:
    """:class:`RayOutcomes`; ``drained``: the log of the ended job was read to its end, which settles it."""
    return RAY_OUTCOMES.decide(trial_id, result, job, settled=drained, **view)


Query = Callable[[], Awaitable[dict[str, RayJob]]]


class JobWatcher(BatchJobWatcher[RayJob]):
    """The one place that asks Ray about trial jobs: one ``list_jobs`` for all of them when a query is due;
    see :mod:`..batch.watcher`."""

    platform = "ray"

    MIN_INTERVAL, MAX_INTERVAL = 1.0, 10.0

    def __init__(self, list_jobs: Query, **pacing: Any) -> None:
        super().__init__(**pacing)
        self.list_jobs = list_jobs

    async def query(self, job_ids: list[str]) -> dict[str, RayJob]:
        return await self.list_jobs()
