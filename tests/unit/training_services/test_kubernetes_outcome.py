"""How a Kubernetes trial ended, from its record and its job's state: one table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.kubernetes.outcome import TrialView, trial_outcome
from trialfleet.training_services.kubernetes.states import JobState

S, K = TrialStatus, FailureKind
RUNNING = JobState(S.RUNNING, None, "running")
WAITING = JobState(S.WAITING, None, "waiting")
SUCCEEDED = JobState(S.SUCCEEDED, None, "succeeded")
FAILED = JobState(S.FAILED, K.USER_CODE, "TFJob x has failed because 1 Worker replica(s) failed.")
STOPPED = JobState(S.USER_CANCELED, K.CANCELED, "StopFrameworkRequested (completion code -210)")
EXIT_0 = {"exit_code": 0, "reason": "exit code 0", "end_time": 1.0}
EXIT_3 = {"exit_code": 3, "reason": "exit code 3", "end_time": 1.0}
SIGNALLED = {"exit_code": None, "signal": 15, "canceled": True, "reason": "canceled", "end_time": 1.0}

CASES: list[tuple[str, dict[str, Any], tuple[Any, ...] | None]] = [
    # the keeper's record decides once the job agrees that it is over
    ("record, job running", {"result": EXIT_0, "job": RUNNING}, None),
    ("record, job succeeded", {"result": EXIT_0, "job": SUCCEEDED}, (S.SUCCEEDED, None, 0, "exit code 0")),
    (
        "failed record, job failed",
        {"result": EXIT_3, "job": FAILED},
        (S.FAILED, K.USER_CODE, 3, "exit code 3"),
    ),
    (
        "record, resource gone",
        {"result": EXIT_3, "job": None, "gone": True},
        (S.FAILED, K.USER_CODE, 3, "exit code 3"),
    ),
    ("record, job unknown", {"result": EXIT_0, "job": None}, None),
    (
        "record, primary done long ago",
        {"result": EXIT_0, "job": RUNNING, "primary_overdue": True},
        (S.SUCCEEDED, None, 0, "exit code 0"),
    ),
    (
        "succeeded, another replica failed",
        {"result": EXIT_0, "job": FAILED},
        (S.FAILED, K.USER_CODE, 0, "the trial succeeded, but its job did not"),
    ),
    # signalled by the platform: its status says why
    ("signalled, job still running (rescale)", {"result": SIGNALLED, "job": RUNNING}, None),
    (
        "signalled, job failed",
        {"result": SIGNALLED, "job": FAILED},
        (S.FAILED, K.USER_CODE, None, "1 Worker replica(s) failed"),
    ),
    (
        # the chief or ps finished first and the completion policy ended the job: the reporting replica was stopped
        "signalled, job succeeded",
        {"result": SIGNALLED, "job": SUCCEEDED},
        (S.FAILED, K.USER_CODE, None, "did not finish (canceled), yet its job succeeded"),
    ),
    (
        "signalled, stopped outside",
        {"result": SIGNALLED, "job": STOPPED},
        (S.USER_CANCELED, K.CANCELED, None, "-210"),
    ),
    (
        "signalled, deleted outside",
        {"result": SIGNALLED, "job": None, "gone": True},
        (S.USER_CANCELED, K.CANCELED, None, "canceled"),
    ),
    # cancelled by trialfleet: over once the resource is gone
    (
        "cancel sent, still there",
        {"result": SIGNALLED, "job": RUNNING, "cancel_status": S.USER_CANCELED},
        None,
    ),
    (
        "cancel, gone",
        {"job": None, "gone": True, "cancel_status": S.EARLY_STOPPED},
        (S.EARLY_STOPPED, K.CANCELED, None, "canceled"),
    ),
    (
        "cancel overdue with a record",
        {"result": SIGNALLED, "job": RUNNING, "cancel_status": S.SYS_CANCELED, "cancel_overdue": True},
        (S.SYS_CANCELED, K.CANCELED, None, "canceled"),
    ),
    (
        "cancel after it ended by itself",
        {"result": EXIT_0, "job": None, "gone": True, "cancel_status": S.USER_CANCELED},
        (S.SUCCEEDED, None, 0, "exit code 0"),
    ),
    (
        "cancel overdue without a record",
        {"job": RUNNING, "cancel_status": S.SYS_CANCELED, "cancel_overdue": True},
        None,
    ),
    # no record
    (
        "gone without a record",
        {"job": None, "gone": True},
        (S.FAILED, K.INFRASTRUCTURE, None, "lost: its resource is gone"),
    ),
    (
        "a pod the platform failed",
        {"job": RUNNING, "problem": "pod p: Evicted"},
        (S.FAILED, K.INFRASTRUCTURE, None, "pod p: Evicted"),
    ),
    ("running", {"job": RUNNING, "keeper_started": True}, None),
    ("waiting", {"job": WAITING}, None),
    ("ended, not settled", {"job": FAILED, "keeper_started": True}, None),
    (
        "ended, keeper left no record",
        {"job": FAILED, "keeper_started": True, "settled": True},
        (S.FAILED, K.INFRASTRUCTURE, None, "lost: the trial keeper left no final record"),
    ),
    (
        "succeeded, keeper never started",
        {"job": SUCCEEDED, "settled": True},
        (S.FAILED, K.USER_CODE, None, "before the trial keeper started"),
    ),
    (
        "failed, keeper never started",
        {"job": FAILED, "settled": True},
        (S.FAILED, K.USER_CODE, None, "the trial keeper did not start"),
    ),
    (
        "stopped outside before it started",
        {"job": STOPPED, "settled": True},
        (S.USER_CANCELED, K.CANCELED, None, "canceled outside trialfleet"),
    ),
]


@pytest.mark.parametrize(("case", "view", "expected"), CASES, ids=[case[0] for case in CASES])
def test_trial_outcome(case: str, view: dict[str, Any], expected: tuple[Any, ...] | None) -> None:
    fields = {"result": None, "job": None, "gone": False, **view}
    ended = trial_outcome("t", TrialView(**fields))
    if expected is None:
        assert ended is None
        return
    assert ended is not None
    status, kind, exit_code, message = expected
    assert (ended.trial_id, ended.status, ended.failure_kind, ended.exit_code) == (
        "t",
        status,
        kind,
        exit_code,
    )
    assert message in (ended.message or "")
