"""Ray's view of trial jobs: the state table, how a trial ended, and the job watcher.

The keeper's ``result.json`` (mirrored from the job's log) decides how a trial ended whenever it arrived; Ray's
job state only says what the keeper could not: a runtime environment that could not be set up, a node lost
under the job (its supervisor actor died), a job stopped outside trialfleet, a job the cluster forgot (the head
restarted). Everything here but :class:`JobWatcher` is a pure function of its arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning
from trialfleet.training_services.job_states import failed as _failed
from trialfleet.training_services.trial_dir import ended_from_result, lost

log = logging.getLogger(__name__)

_MISSING_QUERIES_BEFORE_GONE = 2


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


def trial_outcome(
    trial_id: str,
    result: Mapping[str, Any] | None,
    job: RayJob | None,
    *,
    keeper_started: bool,
    cancel_status: TrialStatus | None,
    gone: bool,
    drained: bool,
) -> TrialEnded | None:
    """How the trial ended, or None while that is not known yet.

    ``result`` is the mirrored result.json; ``job`` the last state Ray reported; ``gone`` means Ray no longer
    knows the job; ``drained`` that the log of the ended job was read to its end.
    """
    if result is not None:
        return ended_from_result(trial_id, result, cancel_status)
    if cancel_status is not None and (gone or (job is not None and (job.ended or not job.placed))):
        # a job stopped while still unplaced never runs its trial: Ray stops it as soon as it is placed
        return TrialEnded(trial_id, cancel_status, time.time(), None, "canceled", FailureKind.CANCELED)
    if gone:
        return lost(
            trial_id, "lost: Ray no longer knows the job (the head restarted, or the job was deleted)"
        )
    if job is None or not job.ended or not drained:
        return None
    if job.status in ("SUCCEEDED", "FAILED") and job.error_type in (None, "JOB_ENTRYPOINT_COMMAND_ERROR"):
        if keeper_started:
            return lost(trial_id, f"lost: the trial keeper ended without a final record ({job.describe()})")
        message = f"the job ended before the trial keeper started ({job.describe()})"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), job.exit_code, message, INFRA)
    meaning = job.meaning
    return TrialEnded(
        trial_id,
        meaning.status,
        time.time(),
        job.exit_code,
        f"{meaning.reason}: {job.describe()}",
        meaning.failure_kind,
    )


Query = Callable[[], Awaitable[dict[str, RayJob]]]


class JobWatcher:
    """The one place that asks Ray about trial jobs: one ``list_jobs`` for all of them when a query is due.

    Queries start ``min_interval`` apart and back off towards ``max_interval`` while nothing changes; a
    change, a new job or :meth:`hurry` brings them back. Ended jobs are not asked about again. A failed
    query (the head is down) is logged once and retried later; it never raises.
    """

    def __init__(
        self,
        query: Query,
        *,
        min_interval: float = 1.0,
        max_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.query = query
        self.min_interval, self.max_interval = min_interval, max_interval
        self.clock = clock
        self.jobs: dict[str, RayJob] = {}
        self.unreachable: str | None = None  # why the last query failed
        self._missing: dict[str, int] = {}
        self._interval = min_interval
        self._next_query = 0.0

    def watch(self, submission_id: str) -> None:
        self._missing.setdefault(submission_id, 0)
        self.hurry()

    def forget(self, submission_id: str) -> None:
        self.jobs.pop(submission_id, None)
        self._missing.pop(submission_id, None)

    def hurry(self) -> None:
        self._interval = self.min_interval
        self._next_query = 0.0

    def gone(self, submission_id: str) -> bool:
        return self._missing.get(submission_id, 0) >= _MISSING_QUERIES_BEFORE_GONE

    async def refresh(self) -> None:
        live = [sid for sid in self._missing if not self.gone(sid) and not self._ended(sid)]
        now = self.clock()
        if now < self._next_query or not live:
            return
        try:
            found = await self.query()
        except PlatformError as exc:
            if self.unreachable is None:
                log.warning("ray: cannot list the cluster's jobs (retried): %s", exc)
            self.unreachable = str(exc)
            found = None
        else:
            if self.unreachable is not None:
                log.info("ray: the cluster answers again")
            self.unreachable = None
        changed = found is not None and self._update(live, found)
        self._interval = self.min_interval if changed else min(self._interval * 1.5, self.max_interval)
        self._next_query = now + self._interval

    def _ended(self, submission_id: str) -> bool:
        job = self.jobs.get(submission_id)
        return job is not None and job.ended

    def _update(self, asked: Iterable[str], found: Mapping[str, RayJob]) -> bool:
        changed = False
        for sid in asked:
            job = found.get(sid)
            if job is None:
                self._missing[sid] += 1
                changed |= self.gone(sid)
                continue
            self._missing[sid] = 0
            changed |= self.jobs.get(sid) != job
            self.jobs[sid] = job
        return changed
