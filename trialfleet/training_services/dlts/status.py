"""DLTS's view of trial jobs: the state table, how a trial ended, and the job watcher.

The keeper's ``result.json`` decides how a trial ended whenever it exists; DLTS's ``jobStatus`` fills in what
the keeper could not say (a launcher error, a job killed or paused outside trialfleet, a job DLTS forgot).
Everything here but :class:`JobWatcher` is a pure function of its arguments.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.dlts.client import DashboardClient
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.trial_dir import ended_from_result, lost

log = logging.getLogger(__name__)

#: how long a job may be ended without result.json showing up on the storage (NFS attribute caches)
RESULT_GRACE = 3.0
#: reads answering ``{}`` in a row before a job counts as gone (one could race a database failover)
MISSING_READS_BEFORE_GONE = 2

INFRA, USER = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE


@dataclass(frozen=True)
class StateMeaning:
    status: TrialStatus
    failure_kind: FailureKind | None
    reason: str
    paused: bool = False  # DLTS paused or preempted the job: it would start over later, so it is ended here


def _waiting(reason: str) -> StateMeaning:
    return StateMeaning(TrialStatus.WAITING, None, reason)


DLTS_STATES: Mapping[str, StateMeaning] = {
    "unapproved": _waiting("waiting for approval (DLTS approves jobs within the team's quota)"),
    "queued": _waiting("queued by DLTS, waiting for GPUs"),
    "scheduling": _waiting("DLTS is creating the job's pod"),
    "running": StateMeaning(TrialStatus.RUNNING, None, "running"),
    "killing": StateMeaning(TrialStatus.RUNNING, None, "being killed"),
    "finished": StateMeaning(TrialStatus.SUCCEEDED, None, "the job finished"),
    "failed": StateMeaning(TrialStatus.FAILED, USER, "the job failed"),
    "error": StateMeaning(TrialStatus.FAILED, INFRA, "DLTS could not launch the job"),
    "killed": StateMeaning(
        TrialStatus.USER_CANCELED, FailureKind.CANCELED, "killed outside trialfleet (dashboard or admin)"
    ),
    # a paused job resumes as "unapproved" and runs its command from the start: not this attempt any more
    "pausing": StateMeaning(TrialStatus.FAILED, INFRA, "paused by DLTS (preempted, or by an admin)", True),
    "paused": StateMeaning(TrialStatus.FAILED, INFRA, "paused by DLTS (preempted, or by an admin)", True),
}


def dlts_state_meaning(job_status: str | None) -> StateMeaning:
    """A DLTS ``jobStatus`` → trialfleet's status, failure kind and a reason for messages."""
    meaning = DLTS_STATES.get(job_status or "")
    return meaning or StateMeaning(TrialStatus.UNKNOWN, None, f"unknown DLTS job status {job_status!r}")


@dataclass(frozen=True)
class DltsJob:
    """What one read of a job's v2 detail says."""

    job_id: str
    status: str
    message: str | None = None  # the failure text of ``jobStatusDetail`` / ``errorMsg``, when DLTS gives one

    @classmethod
    def from_detail(cls, job_id: str, detail: Mapping[str, Any]) -> DltsJob:
        return cls(job_id, str(detail.get("jobStatus", "")), _detail_message(detail))

    @property
    def meaning(self) -> StateMeaning:
        return dlts_state_meaning(self.status)

    @property
    def ended(self) -> bool:
        return self.meaning.status.is_terminal and not self.meaning.paused

    @property
    def waiting(self) -> bool:
        return self.meaning.status is TrialStatus.WAITING

    @property
    def active(self) -> bool:
        """Running, or waiting to (again)."""
        return self.meaning.status in (TrialStatus.WAITING, TrialStatus.RUNNING)

    def describe(self) -> str:
        text = f"DLTS job {self.job_id} {self.status}"
        return f"{text}: {self.message}" if self.message else text


def _detail_message(detail: Mapping[str, Any]) -> str | None:
    for key in ("errorMsg", "message"):
        if detail.get(key):
            return str(detail[key])
    statuses = detail.get("jobStatusDetail")
    if isinstance(statuses, list):
        messages = [
            str(item["message"]) for item in statuses if isinstance(item, dict) and item.get("message")
        ]
        if messages:
            return "; ".join(messages)[:500]
    return None


def trial_outcome(
    trial_id: str,
    result: Mapping[str, Any] | None,
    job: DltsJob | None,
    *,
    keeper_started: bool,
    cancel_status: TrialStatus | None,
    gone: bool,
    settled: bool,
) -> TrialEnded | None:
    """How the trial ended, or None while that is not known yet.

    ``result`` is the keeper's result.json; ``job`` DLTS's last answer (None: none yet, or none read since the
    keeper recorded a cancel nobody here asked for); ``gone`` means DLTS no longer knows the job; ``settled``
    that the job ended long enough ago for result.json to be visible on the storage.
    """
    if result is not None and (not result.get("canceled") or cancel_status is not None):
        return ended_from_result(trial_id, result, cancel_status)
    if gone:
        if cancel_status is not None:
            return TrialEnded(trial_id, cancel_status, time.time(), None, "canceled", FailureKind.CANCELED)
        return lost(trial_id, "lost: DLTS no longer knows the job and the trial keeper left no final record")
    if result is not None:
        return _canceled_elsewhere(trial_id, result, job)
    if job is None:
        return None
    if job.meaning.paused:
        return _dlts_ended(trial_id, job)
    if not job.ended:
        return None
    if cancel_status is not None:
        return TrialEnded(
            trial_id, cancel_status, time.time(), None, f"canceled ({job.describe()})", FailureKind.CANCELED
        )
    if not settled:
        return None
    if job.status in ("finished", "failed"):
        if keeper_started:
            return lost(trial_id, f"lost: the trial keeper ended without a final record ({job.describe()})")
        message = f"the job ended before the trial keeper started ({job.describe()}); see dlts.log"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, USER)
    return _dlts_ended(trial_id, job)


def _canceled_elsewhere(trial_id: str, result: Mapping[str, Any], job: DltsJob | None) -> TrialEnded | None:
    """The keeper was signalled, not by us: its pod was deleted (a kill elsewhere, a pause, a preemption, a
    job removed from DLTS's database). ``job`` must be a state read after result.json was seen."""
    if job is None or job.status == "killing":
        return None  # DLTS will say why soon
    if job.status in ("finished", "failed"):
        return ended_from_result(trial_id, result)  # someone signalled the keeper itself
    if job.active:  # preempted: DLTS queued the job again, to start the command over
        message = f"preempted by DLTS ({job.describe()}); the job was queued again"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), result.get("exit_code"), message, INFRA)
    return _dlts_ended(trial_id, job)


def _dlts_ended(trial_id: str, job: DltsJob) -> TrialEnded:
    meaning = job.meaning
    message = f"{meaning.reason} ({job.describe()})"
    return TrialEnded(trial_id, meaning.status, time.time(), None, message, meaning.failure_kind)


class JobWatcher:
    """The one place that reads jobs from the dashboard: every watched job once when a look is due.

    Looks start ``min_interval`` apart and back off towards ``max_interval`` while nothing changes; a change, a
    new job or :meth:`hurry` brings them back. Ended jobs are kept and never read again. A failed read is logged
    and retried later; it never raises.
    """

    def __init__(
        self,
        client: DashboardClient,
        *,
        min_interval: float = 1.0,
        max_interval: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.min_interval, self.max_interval = min_interval, max_interval
        self.clock = clock
        self.jobs: dict[str, DltsJob] = {}
        self.ended_at: dict[str, float] = {}
        self.read_at: dict[str, float] = {}  # when DLTS last answered about the job
        self._missing: dict[str, int] = {}
        self._interval = min_interval
        self._next_look = 0.0
        self._failing: str | None = None

    def watch(self, job_id: str) -> None:
        self._missing.setdefault(job_id, 0)
        self.hurry()

    def forget(self, job_id: str) -> None:
        for table in (self.jobs, self.ended_at, self.read_at, self._missing):
            table.pop(job_id, None)

    def reread(self, job_id: str) -> None:
        """Read the job at the next look, even when it ended already."""
        self.ended_at.pop(job_id, None)
        self.hurry()

    def hurry(self) -> None:
        self._interval = self.min_interval
        self._next_look = 0.0

    def gone(self, job_id: str) -> bool:
        return self._missing.get(job_id, 0) >= MISSING_READS_BEFORE_GONE

    def ended_for(self, job_id: str) -> float | None:
        since = self.ended_at.get(job_id)
        return None if since is None else self.clock() - since

    async def refresh(self) -> None:
        now = self.clock()
        live = [job for job in self._missing if job not in self.ended_at and not self.gone(job)]
        if now < self._next_look or not live:
            return
        answers = await asyncio.gather(*(self.client.job(job) for job in live), return_exceptions=True)
        changed = False
        for job_id, answer in zip(live, answers, strict=True):
            if isinstance(answer, PlatformError):
                self._report_failure(answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            if self._update(job_id, answer, now):
                changed = True
                await self._explain(job_id)
        self._interval = self.min_interval if changed else min(self._interval * 1.5, self.max_interval)
        self._next_look = now + self._interval

    async def _explain(self, job_id: str) -> None:
        """A job that turned ``error`` gets the launcher's message (``errorMsg``), which its detail lacks."""
        job = self.jobs.get(job_id)
        if job is None or job.status != "error":
            return
        try:
            message = await self.client.error_message(job_id)
        except PlatformError as exc:
            log.debug("dlts: cannot read why job %s failed: %s", job_id, exc)
            return
        if message:
            self.jobs[job_id] = dataclasses.replace(job, message=message)

    def _report_failure(self, error: PlatformError) -> None:
        if self._failing != str(error):
            log.warning("dlts: job status read failed (retried later): %s", error)
        self._failing = str(error)

    def _update(self, job_id: str, detail: Mapping[str, Any] | None, now: float) -> bool:
        self._failing = None
        self.read_at[job_id] = now
        if detail is None:
            self._missing[job_id] += 1
            return self.gone(job_id)
        self._missing[job_id] = 0
        job = DltsJob.from_detail(job_id, detail)
        changed = self.jobs.get(job_id) != job
        self.jobs[job_id] = job
        if job.ended:
            self.ended_at.setdefault(job_id, now)
        return changed
