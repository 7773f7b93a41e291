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
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.job_states import INFRA, USER, StateMeaning, state_meaning
from trialfleet.training_services.job_states import running as _running
from trialfleet.training_services.job_states import waiting as _waiting
from trialfleet.training_services.trial_dir import cut_short, ended_from_result, lost

#: how long a job may be ended before the mirror must hold result.json (the forwarder ships it before exiting)
RESULT_GRACE = 3.0

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
class AmlJob:
    """What one read of a job says."""

    name: str
    status: str
    error: str | None = None  # run history's error message, when the job failed

    @property
    def meaning(self) -> StateMeaning:
        return aml_state_meaning(self.status)

    @property
    def ended(self) -> bool:
        return self.meaning.status.is_terminal

    @property
    def waiting(self) -> bool:
        return self.meaning.status is TrialStatus.WAITING

    def describe(self) -> str:
        text = f"Azure ML job {self.name} {self.status}"
        return f"{text}: {self.error}" if self.error else text


def trial_outcome(
    trial_id: str,
    result: Mapping[str, Any] | None,
    job: AmlJob | None,
    *,
    keeper_started: bool,
    cancel_status: TrialStatus | None,
    settled: bool,
) -> TrialEnded | None:
    """How the trial ended, or None while that is not known yet (``settled``: the job ended a while ago)."""
    if result is not None:
        if result.get("canceled") and cancel_status is None and job is not None and job.status != "Canceled":
            if not job.ended:
                return None  # Azure ML will say why soon
            if job.meaning.status is TrialStatus.SUCCEEDED:  # another node of the job ended it first
                return cut_short(trial_id, result, job.describe())
            return _aml_ended(trial_id, job)  # the node went away, or the job was paused
        return ended_from_result(trial_id, result, cancel_status)
    if job is None or not job.ended:
        return None
    if cancel_status is not None:
        message = f"canceled ({job.describe()})"
        return TrialEnded(trial_id, cancel_status, time.time(), None, message, FailureKind.CANCELED)
    if not settled:
        return None
    if job.status in ("Completed", "Failed"):
        if keeper_started:
            return lost(trial_id, f"lost: the trial keeper ended without a final record ({job.describe()})")
        # the trial never ran: the image, the environment or the node failed it
        message = f"the job ended before the trial started ({job.describe()}); see the job's std_log.txt"
        return TrialEnded(trial_id, TrialStatus.FAILED, time.time(), None, message, INFRA)
    return _aml_ended(trial_id, job)


def _aml_ended(trial_id: str, job: AmlJob) -> TrialEnded:
    meaning = job.meaning
    message = f"{meaning.reason} ({job.describe()})"
    return TrialEnded(trial_id, meaning.status, time.time(), None, message, meaning.failure_kind)
