"""DLTS's job states and how a trial ended: pure functions, tested table by table."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.dlts.job import job_id, job_name
from trialfleet.training_services.dlts.status import DltsJob, dlts_state_meaning, trial_outcome

W, R = TrialStatus.WAITING, TrialStatus.RUNNING
INFRA, USER, CANCELED = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE, FailureKind.CANCELED


@pytest.mark.parametrize(
    ("state", "status", "kind", "paused"),
    [
        ("unapproved", W, None, False),
        ("queued", W, None, False),
        ("scheduling", W, None, False),
        ("running", R, None, False),
        ("killing", R, None, False),
        ("finished", TrialStatus.SUCCEEDED, None, False),
        ("failed", TrialStatus.FAILED, USER, False),
        ("error", TrialStatus.FAILED, INFRA, False),
        ("killed", TrialStatus.USER_CANCELED, CANCELED, False),
        ("pausing", TrialStatus.FAILED, INFRA, True),
        ("paused", TrialStatus.FAILED, INFRA, True),
        ("something new", TrialStatus.UNKNOWN, None, False),
        (None, TrialStatus.UNKNOWN, None, False),
    ],
)
def test_state_table(state: str | None, status: TrialStatus, kind: FailureKind | None, paused: bool) -> None:
    meaning = dlts_state_meaning(state)
    assert (meaning.status, meaning.failure_kind, meaning.paused) == (status, kind, paused)


def test_ended_waiting_and_active() -> None:
    assert [DltsJob("j", s).ended for s in ("running", "finished", "paused", "error")] == [
        False,
        True,
        False,
        True,
    ]
    assert [DltsJob("j", s).waiting for s in ("unapproved", "running")] == [True, False]
    assert [DltsJob("j", s).active for s in ("queued", "killing", "killed")] == [True, True, False]


def test_failure_text_comes_from_the_detail() -> None:
    detail = {"jobStatus": "failed", "jobStatusDetail": [{"message": "OOMKilled"}, {"startedAt": "x"}]}
    assert DltsJob.from_detail("j", detail).describe() == "DLTS job j failed: OOMKilled"
    assert DltsJob.from_detail("j", {"jobStatus": "error", "errorMsg": "no image"}).message == "no image"


def outcome(result: dict[str, Any] | None, status: str | None, **kw: Any) -> tuple[Any, ...] | None:
    args: dict[str, Any] = {"keeper_started": True, "cancel_status": None, "gone": False, "settled": True}
    args.update(kw)
    job = DltsJob("j", status) if status is not None else None
    ended = trial_outcome("t", result, job, **args)
    return None if ended is None else (ended.status, ended.failure_kind, (ended.message or "").split(" (")[0])


EXIT_0 = {"exit_code": 0, "reason": "exit code 0"}
CANCELED_RESULT = {"canceled": True, "reason": "canceled"}


@pytest.mark.parametrize(
    ("result", "status", "kw", "expected"),
    [
        # the keeper's record decides
        (EXIT_0, "running", {}, (TrialStatus.SUCCEEDED, None, "exit code 0")),
        ({"exit_code": 3, "reason": "exit code 3"}, "failed", {}, (TrialStatus.FAILED, USER, "exit code 3")),
        (
            CANCELED_RESULT,
            "killed",
            {"cancel_status": TrialStatus.EARLY_STOPPED},
            (TrialStatus.EARLY_STOPPED, CANCELED, "canceled"),
        ),
        # a cancel nobody here asked for: DLTS says why
        (CANCELED_RESULT, None, {}, None),
        (CANCELED_RESULT, "killing", {}, None),
        (CANCELED_RESULT, "killed", {}, (TrialStatus.USER_CANCELED, CANCELED, "killed outside trialfleet")),
        (CANCELED_RESULT, "queued", {}, (TrialStatus.FAILED, INFRA, "preempted by DLTS")),
        (CANCELED_RESULT, "paused", {}, (TrialStatus.FAILED, INFRA, "paused by DLTS")),
        (CANCELED_RESULT, "finished", {}, (TrialStatus.USER_CANCELED, CANCELED, "canceled")),
        (
            CANCELED_RESULT,
            "queued",
            {"gone": True},
            (
                TrialStatus.FAILED,
                INFRA,
                "lost: DLTS no longer knows the job and the trial keeper left no final record",
            ),
        ),
        # no record: DLTS's state, after the grace for result.json
        (None, "running", {}, None),
        (None, "queued", {}, None),
        (None, "pausing", {}, (TrialStatus.FAILED, INFRA, "paused by DLTS")),
        (
            None,
            "error",
            {"keeper_started": False},
            (TrialStatus.FAILED, INFRA, "DLTS could not launch the job"),
        ),
        (None, "finished", {"settled": False}, None),
        (
            None,
            "finished",
            {},
            (TrialStatus.FAILED, INFRA, "lost: the trial keeper ended without a final record"),
        ),
        (
            None,
            "failed",
            {"keeper_started": False},
            (TrialStatus.FAILED, USER, "the job ended before the trial keeper started"),
        ),
        (
            None,
            "killed",
            {"cancel_status": TrialStatus.USER_CANCELED},
            (TrialStatus.USER_CANCELED, CANCELED, "canceled"),
        ),
        (
            None,
            None,
            {"gone": True},
            (
                TrialStatus.FAILED,
                INFRA,
                "lost: DLTS no longer knows the job and the trial keeper left no final record",
            ),
        ),
        (
            None,
            None,
            {"gone": True, "cancel_status": TrialStatus.USER_CANCELED},
            (TrialStatus.USER_CANCELED, CANCELED, "canceled"),
        ),
        (None, None, {}, None),
    ],
)
def test_trial_outcome(
    result: dict[str, Any] | None, status: str | None, kw: dict[str, Any], expected: tuple[Any, ...] | None
) -> None:
    assert outcome(result, status, **kw) == expected


def test_names_and_ids_per_attempt() -> None:
    assert job_name("exp", "abc", 0) == "nni_exp_exp_trial_abc"
    assert job_name("exp", "abc", 2) == "nni_exp_exp_trial_abc_attempt_2"
    assert job_id("exp", "abc", 0) == job_id("exp", "abc", 0)
    assert len({job_id("exp", "abc", 0), job_id("exp", "abc", 1), job_id("exp2", "abc", 0)}) == 3
    with pytest.raises(ValueError, match="trial id"):
        job_name("exp", "a b", 0)
