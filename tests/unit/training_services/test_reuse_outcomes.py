"""How a trial run by a reuse-mode worker ended (``batch/reuse.py``'s WorkerOutcomes), table-driven over real
Slurm job records: the keeper's record decides; a worker job that ends while it has the trial, whatever its state
(completed, cancelled from outside, preempted, timed out), fails it as an infrastructure failure to be re-run."""

from __future__ import annotations

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.batch.outcome import JobView
from trialfleet.training_services.batch.reuse import ReusePolicy, WorkerOutcomes
from trialfleet.training_services.slurm.status import SlurmJob

TABLE = WorkerOutcomes("slurm")
RUNNING = SlurmJob("7", "RUNNING")
OK = {"exit_code": 0, "signal": None, "canceled": False, "timed_out": False, "reason": "exit code 0"}
STOPPED = {**OK, "exit_code": None, "canceled": True, "reason": "canceled"}


def outcome(
    result: dict | None, job: SlurmJob | None, **view: object
) -> tuple[TrialStatus, FailureKind | None] | None:
    ended = TABLE.outcome("t", JobView(result, job, **view))  # type: ignore[arg-type]
    return None if ended is None else (ended.status, ended.failure_kind)


def test_the_keeper_s_record_decides_while_the_worker_runs_on() -> None:
    assert outcome(OK, RUNNING) == (TrialStatus.SUCCEEDED, None)
    assert outcome({**OK, "exit_code": 3}, RUNNING) == (TrialStatus.FAILED, FailureKind.USER_CODE)
    assert outcome(STOPPED, RUNNING, cancel_status=TrialStatus.USER_CANCELED) == (
        TrialStatus.USER_CANCELED,
        FailureKind.CANCELED,
    )
    assert outcome(None, RUNNING, keeper_started=True) is None


@pytest.mark.parametrize("state", ["COMPLETED", "CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "FAILED"])
def test_a_worker_job_that_ended_fails_its_trial_as_infrastructure(state: str) -> None:
    job = SlurmJob("7", state)
    infra = (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert outcome(STOPPED, job) == infra  # its keeper signalled by the job's end
    assert outcome(STOPPED, RUNNING) == infra  # ... even before the job is seen ended
    assert outcome(None, job, keeper_started=True, settled=True) == infra
    assert outcome(None, job, keeper_started=False, settled=True) == infra  # never taken
    assert outcome(None, job, settled=False) is None  # result.json may still be on its way


def test_a_worker_queued_again_leaves_its_trials_to_its_next_start() -> None:
    """The job's state may be older than the keeper's start: a queued worker never decides a trial alone."""
    requeued = SlurmJob("7", "REQUEUED")
    assert outcome(None, requeued, keeper_started=True) is None
    assert outcome(None, requeued, keeper_started=False) is None


def test_a_trial_cancelled_in_a_worker_that_ended_is_cancelled_and_a_gone_worker_lost() -> None:
    job = SlurmJob("7", "CANCELLED")
    assert outcome(None, job, cancel_status=TrialStatus.USER_CANCELED) == (
        TrialStatus.USER_CANCELED,
        FailureKind.CANCELED,
    )
    assert outcome(None, None, gone=True) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)


def test_a_worker_has_one_slot_without_gpus_and_max_trial_number_per_gpu_with_them() -> None:
    assert ReusePolicy.of(None, 4, 60).slots == 1
    assert ReusePolicy.of(0, 4, 60).slots == 1
    assert ReusePolicy.of(2, 4, 60).slots == 4
