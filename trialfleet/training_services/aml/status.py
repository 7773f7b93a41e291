"""Azure ML's view of trial jobs: the state table and how a trial ended, as pure functions.

The keeper's ``result.json`` (mirrored from the job's MLflow run) decides how a trial ended whenever it exists;
the job's status fills in what the keeper could not say: a job that failed before the trial started (an image
that cannot be pulled, an environment that cannot be built), a node lost, a job cancelled outside trialfleet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import JobRecord, JobView, OutcomeTable
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning, state_meaning
from trialfleet.training_services.job_states import running as _running
from trialfleet.training_services.job_states import waiting as _waiting
from trialfleet.training_services.trial_dir import cut_short, ended_from_result

AML_STATES: Mapping[str, StateMeaning] = {
    "NotStarted": _waiting("submitted to Azure ML, not started yet"),
    "Starting": _waiting("Azure ML is starting the job"),
    "Provisioning": _waiting("the compute target is scaling up"),
    "Preparing": _waiting("Azure ML is preparing the job's environment (image)"),
    "Queued": _waiting("queued for the compute target"),
    "Running": _running("running"),
    "Finalizing": _running("finalizing (uploading outputs)"),
    "CancelRequested": _running("being cancelled"),
    "Completed": StateMeaning(TrialStatus.SUCCEEDED, None, "the job completed"),
    "Failed": StateMeaning(TrialStatus.FAILED, USER, "the job failed"),
    "Canceled": StateMeaning(
        TrialStatus.USER_CANCELED, FailureKind.CANCELED, "cancelled outside trialfleet (studio, CLI)"
    ),
    "NotResponding": StateMeaning(TrialStatus.FAILED, INFRA, "the job's node stopped responding"),
    "Paused": StateMeaning(TrialStatus.FAILED, INFRA, "Azure ML paused the job"),
}


def aml_state_meaning(status: str | None) -> StateMeaning:
    """An Azure ML job status (SDK ``JobStatus``, REST ``Unknown`` included) → trialfleet's."""
    return state_meaning(AML_STATES, status, "Azure ML job status")


@dataclass(frozen=True)
class AmlJob(JobRecord):
    """What one read of a job says."""

    name: str
    status: str
    error: str | None = None  # run history's error message, when the job failed

    @property
    def meaning(self) -> StateMeaning:
        return aml_state_meaning(self.status)

    def describe(self) -> str:
        text = f"Azure ML job {self.name} {self.status}"
        return f"{text}: {self.error}" if self.error else text


class AmlOutcomes(OutcomeTable[AmlJob]):
    never_started_kind = INFRA  # the trial never ran: the image, the environment or the node failed it
    log_hint = "see the job's std_log.txt"

    def from_result(
        self, trial_id: str, result: Mapping[str, Any], view: JobView[AmlJob]
    ) -> TrialEnded | None:
        job, cancel_status = view.job, view.cancel_status
        if result.get("canceled") and cancel_status is None and job is not None and job.status != "Canceled":
            if not job.ended:
                return None  # Azure ML will say why soon
            if job.meaning.status is TrialStatus.SUCCEEDED:  # another node of the job ended it first
                return cut_short(trial_id, result, job.describe())
            return self.job_ended(trial_id, job)  # the node went away, or the job was paused
        return ended_from_result(trial_id, result, cancel_status)

    def exited(self, job: AmlJob) -> bool:
        return job.status in ("Completed", "Failed")

    def never_started(self, trial_id: str, job: AmlJob) -> TrialEnded:
        message = f"the job ended before the trial started ({job.describe()}); {self.log_hint}"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, INFRA)


AML_OUTCOMES = AmlOutcomes()


#: how the trial ended, or None while that is not known yet (see AML_OUTCOMES's class)
trial_outcome = AML_OUTCOMES.decide
