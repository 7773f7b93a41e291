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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import JobRecord, JobView, OutcomeTable
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.dlts.client import DashboardClient
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning, state_meaning
from trialfleet.training_services.job_states import waiting as _waiting
from trialfleet.training_services.trial_dir import ended_from_result

log = logging.getLogger(__name__)

#: reads answering ``{}`` in a row before a job counts as gone (one could race a database failover)
MISSING_READS_BEFORE_GONE = 2

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
    return state_meaning(DLTS_STATES, job_status, "DLTS job status")


@dataclass(frozen=True)
class DltsJob(JobRecord):
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


class DltsOutcomes(OutcomeTable[DltsJob]):
    gone_reason = "DLTS no longer knows the job"
    log_hint = "see dlts.log"

    def from_result(
        self, trial_id: str, result: Mapping[str, Any], view: JobView[DltsJob]
    ) -> TrialEnded | None:
        if not result.get("canceled") or view.cancel_status is not None:
            return ended_from_result(trial_id, result, view.cancel_status)
        if view.gone:
            return self.gone(trial_id, view)
        return self._canceled_elsewhere(trial_id, result, view.job)

    def without_result(self, trial_id: str, view: JobView[DltsJob]) -> TrialEnded | None:
        if not view.gone and view.job is not None and view.job.meaning.paused:
            return self.job_ended(trial_id, view.job)
        return super().without_result(trial_id, view)

    def exited(self, job: DltsJob) -> bool:
        return job.status in ("finished", "failed")

    def _canceled_elsewhere(
        self, trial_id: str, result: Mapping[str, Any], job: DltsJob | None
    ) -> TrialEnded | None:
        """The keeper was signalled, not by us: its pod was deleted (a kill elsewhere, a pause, a preemption, a
        job removed from DLTS's database). ``job`` must be a state read after result.json was seen."""
        if job is None or job.status == "killing":
            return None  # DLTS will say why soon
        if self.exited(job):
            return ended_from_result(trial_id, result)  # someone signalled the keeper itself
        if job.active:  # preempted: DLTS queued the job again, to start the command over
            message = f"preempted by DLTS ({job.describe()}); the job was queued again"
            return TrialEnded(
                trial_id, TrialStatus.FAILED, time.time(), result.get("exit_code"), message, INFRA
            )
        return self.job_ended(trial_id, job)


DLTS_OUTCOMES = DltsOutcomes()


#: how the trial ended, or None while that is not known yet (see DLTS_OUTCOMES's class)
trial_outcome = DLTS_OUTCOMES.decide


class JobWatcher(BatchJobWatcher[DltsJob]):
    """The one place that reads jobs from the dashboard: every watched job once when a look is due (DLTS has no
    batched read); see :mod:`..batch.watcher`."""

    platform = "dlts"
    missing_looks = MISSING_READS_BEFORE_GONE

    MIN_INTERVAL, MAX_INTERVAL = 1.0, 15.0

    def __init__(self, client: DashboardClient, **pacing: Any) -> None:
        super().__init__(**pacing)
        self.client = client

    async def query(self, job_ids: list[str]) -> dict[str, DltsJob]:
        answers = await asyncio.gather(*(self.client.job(job) for job in job_ids), return_exceptions=True)
        found: dict[str, DltsJob] = {}
        for job_id, answer in zip(job_ids, answers, strict=True):
            if isinstance(answer, PlatformError):
                self.unread(job_id, answer)
            elif isinstance(answer, BaseException):
                raise answer
            elif answer is not None:
                found[job_id] = await self._explained(DltsJob.from_detail(job_id, answer))
        return found

    async def _explained(self, job: DltsJob) -> DltsJob:
        """A job that turned ``error`` gets the launcher's message (``errorMsg``), which its detail lacks."""
        if job.status != "error":
            return job
        try:
            message = await self.client.error_message(job.job_id)
        except PlatformError as exc:
            log.debug("dlts: cannot read why job %s failed: %s", job.job_id, exc)
            return job
        return dataclasses.replace(job, message=message) if message else job
