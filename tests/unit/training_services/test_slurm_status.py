"""Slurm's view of trial jobs: the state table, squeue/sacct parsing and how a trial ended.

The squeue and sacct lines are real output of Slurm 22.05 (Debian 12), captured with the formats the watcher
uses, for the jobs named in the comments.
"""

from __future__ import annotations

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.slurm.status import (
    RESULT_GRACE,
    RESULT_GRACE_AFTER_KEEPER_EXIT,
    SLURM_STATES,
    SlurmJob,
    accounting_enabled,
    parse_sacct,
    parse_squeue,
    result_grace,
    slurm_state_meaning,
    trial_outcome,
)

W, R = TrialStatus.WAITING, TrialStatus.RUNNING
INFRA, USER, TIMEOUT = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE, FailureKind.TIMEOUT

STATE_TABLE = [
    ("PENDING", W, None),
    ("CONFIGURING", W, None),
    ("REQUEUED", W, None),
    ("REQUEUE_HOLD", W, None),
    ("REQUEUE_FED", W, None),
    ("RESV_DEL_HOLD", W, None),
    ("RUNNING", R, None),
    ("COMPLETING", R, None),
    ("SIGNALING", R, None),
    ("STAGE_OUT", R, None),
    ("RESIZING", R, None),
    ("SUSPENDED", R, None),
    ("STOPPED", R, None),
    ("COMPLETED", TrialStatus.SUCCEEDED, None),
    ("FAILED", TrialStatus.FAILED, USER),
    ("CANCELLED", TrialStatus.USER_CANCELED, FailureKind.CANCELED),
    ("TIMEOUT", TrialStatus.EARLY_STOPPED, TIMEOUT),
    ("DEADLINE", TrialStatus.EARLY_STOPPED, TIMEOUT),
    ("NODE_FAIL", TrialStatus.FAILED, INFRA),
    ("PREEMPTED", TrialStatus.FAILED, INFRA),
    ("BOOT_FAIL", TrialStatus.FAILED, INFRA),
    ("REVOKED", TrialStatus.FAILED, INFRA),
    ("OUT_OF_MEMORY", TrialStatus.FAILED, USER),
    ("SPECIAL_EXIT", TrialStatus.FAILED, USER),
]


@pytest.mark.parametrize(("state", "status", "kind"), STATE_TABLE)
def test_every_slurm_state_has_a_status_a_failure_kind_and_a_reason(
    state: str, status: TrialStatus, kind: FailureKind | None
) -> None:
    meaning = slurm_state_meaning(state)
    assert (meaning.status, meaning.failure_kind) == (status, kind)
    assert meaning.reason


def test_the_table_covers_exactly_the_states_of_squeue_s_manual() -> None:
    assert set(SLURM_STATES) == {state for state, _, _ in STATE_TABLE}


@pytest.mark.parametrize("spelling", ["CANCELLED by 1000", "CANCELLED+", "cancelled", " CANCELLED "])
def test_sacct_and_truncated_spellings_of_a_state(spelling: str) -> None:
    assert slurm_state_meaning(spelling).status is TrialStatus.USER_CANCELED


@pytest.mark.parametrize("state", ["", "FUTURE_STATE"])
def test_an_unknown_state_is_neither_live_nor_ended(state: str) -> None:
    meaning = slurm_state_meaning(state)
    assert meaning.status is TrialStatus.UNKNOWN and not meaning.status.is_terminal


def test_squeue_lines() -> None:
    # exit 3; kill -9 $$; scancel; --begin=now+1hour then scancel; sleep 300 --time=1; a pending job
    out = (
        "1|FAILED|768|NonZeroExitCode|\n"
        "2|FAILED|9|JobLaunchFailure|\n"
        "3|CANCELLED|15|None|\n"
        "6|CANCELLED|0|BeginTime|\n"
        "5|TIMEOUT|15|TimeLimit|\n"
        "9|PENDING|0|Resources|\n"
        "\n"
    )
    assert parse_squeue(out) == {
        "1": SlurmJob("1", "FAILED", "NonZeroExitCode", 3, None),
        "2": SlurmJob("2", "FAILED", "JobLaunchFailure", None, 9),
        "3": SlurmJob("3", "CANCELLED", None, None, 15),
        "6": SlurmJob("6", "CANCELLED", "BeginTime", 0, None),
        "5": SlurmJob("5", "TIMEOUT", "TimeLimit", None, 15),
        "9": SlurmJob("9", "PENDING", "Resources", 0, None),
    }


def test_sacct_lines_leave_job_steps_out() -> None:
    out = (
        "1|FAILED|3:0|None\n"
        "1.batch|FAILED|3:0|\n"
        "2|FAILED|0:9|None\n"
        "2.batch|CANCELLED|0:9|\n"
        "3|CANCELLED by 0|0:0|None\n"
        "5|TIMEOUT|0:0|None\n"
    )
    assert parse_sacct(out) == {
        "1": SlurmJob("1", "FAILED", None, 3, None),
        "2": SlurmJob("2", "FAILED", None, None, 9),
        "3": SlurmJob("3", "CANCELLED", None, 0, None),
        "5": SlurmJob("5", "TIMEOUT", None, 0, None),
    }


def test_accounting_is_read_from_scontrol_show_config() -> None:
    line = "AccountingStorageType   = accounting_storage/{}\nAccountingStorageUser   = root\n"
    assert accounting_enabled(line.format("slurmdbd"))
    assert not accounting_enabled(line.format("none"))
    assert not accounting_enabled("ClusterName = x\n")


def test_a_keeper_that_exited_by_itself_gets_longer_to_show_its_record() -> None:
    assert result_grace(SlurmJob("1", "COMPLETED", exit_code=0), keeper_started=True) == (
        RESULT_GRACE_AFTER_KEEPER_EXIT
    )
    assert result_grace(SlurmJob("1", "FAILED", signal=9), keeper_started=True) == RESULT_GRACE
    assert result_grace(SlurmJob("1", "COMPLETED", exit_code=0), keeper_started=False) == RESULT_GRACE


# ---- how a trial ended -----------------------------------------------------------------------------------

EXITED_3 = {"exit_code": 3, "signal": None, "reason": "exit code 3", "canceled": False, "timed_out": False}
CANCELED = {"exit_code": None, "signal": None, "reason": "canceled", "canceled": True, "timed_out": False}
RUNNING_JOB = SlurmJob("7", "RUNNING")


def outcome(
    result: dict | None = None,
    job: SlurmJob | None = RUNNING_JOB,
    *,
    keeper_started: bool = True,
    cancel_status: TrialStatus | None = None,
    gone: bool = False,
    settled: bool = True,
) -> tuple[TrialStatus, FailureKind | None, int | None, str] | None:
    ended = trial_outcome(
        "t",
        result,
        job,
        keeper_started=keeper_started,
        cancel_status=cancel_status,
        gone=gone,
        settled=settled,
    )
    if ended is None:
        return None
    assert ended.trial_id == "t" and ended.message
    return ended.status, ended.failure_kind, ended.exit_code, ended.message


def test_the_keeper_s_record_decides_even_while_slurm_still_shows_the_job() -> None:
    assert outcome(EXITED_3) == (TrialStatus.FAILED, USER, 3, "exit code 3")
    assert outcome(EXITED_3, SlurmJob("7", "TIMEOUT")) == (TrialStatus.FAILED, USER, 3, "exit code 3")


def test_a_cancel_we_asked_for_is_reported_with_our_status() -> None:
    assert outcome(CANCELED, cancel_status=TrialStatus.EARLY_STOPPED)[:2] == (
        TrialStatus.EARLY_STOPPED,
        FailureKind.CANCELED,
    )


@pytest.mark.parametrize(
    ("state", "status", "kind"),
    [
        ("TIMEOUT", TrialStatus.EARLY_STOPPED, TIMEOUT),
        ("PREEMPTED", TrialStatus.FAILED, INFRA),
        ("NODE_FAIL", TrialStatus.FAILED, INFRA),
        ("CANCELLED", TrialStatus.USER_CANCELED, FailureKind.CANCELED),
    ],
)
def test_a_keeper_signalled_by_slurm_ends_as_slurm_says(
    state: str, status: TrialStatus, kind: FailureKind
) -> None:
    assert outcome(CANCELED, RUNNING_JOB) is None  # the keeper wrote "canceled", Slurm has not said why yet
    ended = outcome(CANCELED, SlurmJob("7", state, signal=15))
    assert ended is not None and ended[:3] == (status, kind, None) and state in ended[3]


def test_a_keeper_signalled_by_hand_is_a_user_cancel() -> None:
    assert outcome(CANCELED, SlurmJob("7", "COMPLETED", exit_code=0))[:2] == (
        TrialStatus.USER_CANCELED,
        FailureKind.CANCELED,
    )
    assert outcome(CANCELED, None)[:2] == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)


def test_without_a_record_a_live_or_unknown_job_has_not_ended() -> None:
    assert outcome(None, RUNNING_JOB) is None
    assert outcome(None, SlurmJob("7", "PENDING", "Resources")) is None
    assert outcome(None, None) is None


def test_without_a_record_an_ended_job_waits_for_the_record_to_show_up() -> None:
    assert outcome(None, SlurmJob("7", "FAILED", signal=9), settled=False) is None


def test_a_keeper_that_died_without_a_record_is_lost() -> None:
    status, kind, code, message = outcome(None, SlurmJob("7", "FAILED", "JobLaunchFailure", signal=9))
    assert (status, kind, code) == (TrialStatus.FAILED, INFRA, None)
    assert message.startswith("lost") and "signal 9" in message


def test_a_job_script_that_failed_before_the_keeper_points_at_slurm_out() -> None:
    status, kind, code, message = outcome(
        None, SlurmJob("7", "FAILED", "NonZeroExitCode", exit_code=1), keeper_started=False
    )
    assert (status, kind, code) == (TrialStatus.FAILED, USER, 1)
    assert "before the trial keeper started" in message and "slurm.out" in message


def test_a_job_slurm_could_not_launch_is_an_infrastructure_failure() -> None:
    job = SlurmJob("7", "FAILED", "JobLaunchFailure", signal=53)
    status, kind, _, message = outcome(None, job, keeper_started=False)
    assert (status, kind) == (TrialStatus.FAILED, INFRA) and "could not launch" in message


@pytest.mark.parametrize(
    ("state", "status", "kind"),
    [
        ("NODE_FAIL", TrialStatus.FAILED, INFRA),
        ("BOOT_FAIL", TrialStatus.FAILED, INFRA),
        ("OUT_OF_MEMORY", TrialStatus.FAILED, USER),
        ("TIMEOUT", TrialStatus.EARLY_STOPPED, TIMEOUT),
        ("CANCELLED", TrialStatus.USER_CANCELED, FailureKind.CANCELED),
    ],
)
def test_slurm_fills_in_when_the_keeper_could_not_write_its_record(
    state: str, status: TrialStatus, kind: FailureKind
) -> None:
    for keeper_started in (False, True):
        ended = outcome(None, SlurmJob("7", state, signal=9), keeper_started=keeper_started)
        assert ended is not None and ended[:2] == (status, kind) and state in ended[3]


def test_a_job_cancelled_by_us_before_it_ran_is_canceled_at_once() -> None:
    ended = outcome(
        None,
        SlurmJob("7", "CANCELLED", "BeginTime", exit_code=0),
        keeper_started=False,
        cancel_status=TrialStatus.USER_CANCELED,
        settled=False,
    )
    assert ended is not None and ended[:2] == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)


def test_a_job_slurm_forgot_without_a_record() -> None:
    status, kind, _, message = outcome(None, None, gone=True)
    assert (status, kind) == (TrialStatus.FAILED, INFRA) and message.startswith("lost")
    assert outcome(None, None, gone=True, cancel_status=TrialStatus.SYS_CANCELED)[:2] == (
        TrialStatus.SYS_CANCELED,
        FailureKind.CANCELED,
    )
    assert outcome(EXITED_3, None, gone=True) == (TrialStatus.FAILED, USER, 3, "exit code 3")
