"""How a trial run as a batch job ended: the keeper's record against the job's state, once for every platform.

The keeper's ``result.json`` decides whenever it exists; the job's state fills in what the keeper could not say
(a node lost, a time limit, a job cancelled or paused outside trialfleet, a job that failed before the keeper
started, a job the platform forgot). A platform subclasses :class:`OutcomeTable` for what its jobs say
differently (the names of its states, what a keeper signalled from outside means there, where its log is).
Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import StateMeaning
from trialfleet.training_services.trial_dir import ended_from_result, lost

#: how long an ended job may go without result.json showing up where the manager reads it (NFS caches)
RESULT_GRACE = 3.0


class JobRecord:
    """A base for a platform's job record whose state says it all: ended, waiting and running follow from
    ``meaning`` (a frozen dataclass below it holds what the platform said)."""

    @property
    def meaning(self) -> StateMeaning:
        raise NotImplementedError

    @property
    def ended(self) -> bool:
        return self.meaning.status.is_terminal

    @property
    def waiting(self) -> bool:
        return self.meaning.status is TrialStatus.WAITING

    @property
    def running(self) -> bool:
        return self.meaning.status is TrialStatus.RUNNING


class BatchJob(Protocol):
    """The job-state protocol: what the outcome table needs of a platform's job record."""

    @property
    def meaning(self) -> StateMeaning: ...

    @property
    def ended(self) -> bool: ...

    def describe(self) -> str: ...


J = TypeVar("J", bound=BatchJob)


@dataclass(frozen=True)
class JobView(Generic[J]):
    """Everything known of one trial's job at one poll (times are judged by the service, which has a clock)."""

    result: Mapping[str, Any] | None  # the keeper's result.json
    job: J | None  # the platform's last answer; None: none yet
    keeper_started: bool = False  # the keeper's keeper.json exists
    cancel_status: TrialStatus | None = None  # trialfleet cancelled it
    gone: bool = False  # the platform no longer knows the job
    settled: bool = False  # the job ended long enough ago for result.json to be visible here


def canceled(trial_id: str, status: TrialStatus, message: str = "canceled") -> TrialEnded:
    return TrialEnded(trial_id, status, time.time(), None, message, FailureKind.CANCELED)


class OutcomeTable(Generic[J]):
    """How a trial ended, or None while that is not known yet: :meth:`outcome`."""

    #: what "gone" means on this platform, for the message of a trial lost with its job
    gone_reason: str = "the platform no longer knows the job"
    #: where the output of a job that ended before the keeper started can be read
    log_hint: str = "see the job's log"
    #: the failure kind of a job that ended by itself before the keeper started
    never_started_kind: FailureKind = FailureKind.USER_CODE

    def decide(
        self,
        trial_id: str,
        result: Mapping[str, Any] | None,
        job: J | None,
        *,
        keeper_started: bool = False,
        cancel_status: TrialStatus | None = None,
        gone: bool = False,
        settled: bool = False,
    ) -> TrialEnded | None:
        """:meth:`outcome` of the view these make (see :class:`JobView`)."""
        return self.outcome(trial_id, JobView(result, job, keeper_started, cancel_status, gone, settled))

    def outcome(self, trial_id: str, view: JobView[J]) -> TrialEnded | None:
        if view.result is not None:
            return self.from_result(trial_id, view.result, view)
        return self.without_result(trial_id, view)

    # ---- hooks, with what most platforms do ----------------------------------------------------------------

    def from_result(self, trial_id: str, result: Mapping[str, Any], view: JobView[J]) -> TrialEnded | None:
        """The keeper recorded its end (``result``): how the trial ended, or None while the job must say why."""
        return ended_from_result(trial_id, result, view.cancel_status)

    def without_result(self, trial_id: str, view: JobView[J]) -> TrialEnded | None:
        if view.gone:
            return self.gone(trial_id, view)
        job = view.job
        if job is None or not job.ended:
            return None
        if view.cancel_status is not None:
            return canceled(trial_id, view.cancel_status, f"canceled ({job.describe()})")
        if not view.settled:
            return None
        return self.settled(trial_id, job, view.keeper_started)

    def gone(self, trial_id: str, view: JobView[J]) -> TrialEnded:
        if view.cancel_status is not None:
            return canceled(trial_id, view.cancel_status)
        return lost(trial_id, f"lost: {self.gone_reason} and the trial keeper left no final record")

    def settled(self, trial_id: str, job: J, keeper_started: bool) -> TrialEnded:
        """The job ended, long enough ago, and the keeper left no ``result.json``."""
        if self.exited(job):
            if keeper_started:
                return lost(
                    trial_id, f"lost: the trial keeper ended without a final record ({job.describe()})"
                )
            return self.never_started(trial_id, job)
        return self.job_ended(trial_id, job, self.exit_code(job))

    def exited(self, job: J) -> bool:
        """The job's own command exited (rather than the platform ending it): a keeper that started should then
        have recorded its end."""
        return False

    def exit_code(self, job: J) -> int | None:
        """The exit code the platform reports of the job's command, where it does."""
        return None

    def never_started(self, trial_id: str, job: J) -> TrialEnded:
        message = f"the job ended before the trial keeper started ({job.describe()})"
        message += f"; {self.log_hint}" if self.log_hint else ""
        kind = self.never_started_kind
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), self.exit_code(job), message, kind)

    def job_ended(self, trial_id: str, job: J, exit_code: int | None = None) -> TrialEnded:
        """The trial ended as the job's state says."""
        meaning = job.meaning
        message = f"{meaning.reason} ({job.describe()})"
        return TrialEnded(trial_id, meaning.status, time.time(), exit_code, message, meaning.failure_kind)
