"""OpenPAI's view of trial jobs: the state table, reading a job's record, how a trial ended, the waiting reason.

``data/openpai_jobs.json`` holds answers of the OpenPAI emulator (tests/emulators/openpai, which transcribes the
rest server's ``convertFrameworkDetail``): a job whose command exited 3 (``appExitCode`` 255 from the PAI runtime,
the command's own code in ``appExitMessages.runtime.originUserExitCode``), a job stopped while running, a job that
succeeded (its detail and its row of the job list).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.openpai.protocol import STORAGE_MISSING_EXIT
from trialfleet.training_services.openpai.status import (
    RESULT_GRACE,
    RESULT_GRACE_AFTER_SUCCESS,
    PaiJob,
    openpai_state_meaning,
    result_grace,
    trial_outcome,
    waiting_reason,
)

JOBS = json.loads((Path(__file__).parent / "data" / "openpai_jobs.json").read_text())
INFRA, USER, CANCELED = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE, FailureKind.CANCELED

STATE_TABLE = [
    # (state, appExitCode, appExitSpec.type) → (status, failure kind)
    ("WAITING", None, None, TrialStatus.WAITING, None),
    ("RUNNING", None, None, TrialStatus.RUNNING, None),
    ("RUNNING", 3, "USER_FAILURE", TrialStatus.RUNNING, None),  # a job retry is coming
    ("STOPPING", -210, "USER_STOP", TrialStatus.RUNNING, None),
    ("SUCCEEDED", 0, "USER_SUCCESS", TrialStatus.SUCCEEDED, None),
    ("STOPPED", -210, "USER_STOP", TrialStatus.USER_CANCELED, CANCELED),
    ("STOPPED", -220, "USER_STOP", TrialStatus.USER_CANCELED, CANCELED),
    ("FAILED", 255, "UNKNOWN_FAILURE", TrialStatus.FAILED, INFRA),  # PAIRuntimeUnknownFailed
    ("FAILED", 220, "USER_FAILURE", TrialStatus.FAILED, USER),  # UserCommandExitWithError
    ("FAILED", 232, "USER_FAILURE", TrialStatus.FAILED, USER),  # ContainerImportError
    ("FAILED", 254, "USER_FAILURE", TrialStatus.FAILED, USER),  # ContainerImageNotExists
    ("FAILED", -1200, "USER_FAILURE", TrialStatus.FAILED, USER),  # UserContainerDockerOOMKilled
    ("FAILED", 137, "PLATFORM_FAILURE", TrialStatus.FAILED, INFRA),  # ContainerSigKillReceived
    ("FAILED", -1000, "PLATFORM_FAILURE", TrialStatus.FAILED, INFRA),  # PodEvicted
    ("FAILED", -1001, "PLATFORM_FAILURE", TrialStatus.FAILED, INFRA),  # PodNodeLost
    ("FAILED", 251, "RESOURCE_ALLOCATION_TIMEOUT", TrialStatus.FAILED, INFRA),  # JobGangAllocationTimeout
    ("FAILED", -1004, "USER_STOP", TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT),  # PodDeadlineExceeded
    ("FAILED", -230, "USER_STOP", TrialStatus.USER_CANCELED, CANCELED),  # DeleteTaskRequested
    ("FAILED", -100, None, TrialStatus.FAILED, INFRA),  # no exit spec read: negative codes are OpenPAI's
    ("FAILED", 3, None, TrialStatus.FAILED, USER),
    ("UNKNOWN", None, None, TrialStatus.UNKNOWN, None),
    ("SOMETHING_NEW", None, None, TrialStatus.UNKNOWN, None),
]


@pytest.mark.parametrize(("state", "code", "exit_type", "status", "kind"), STATE_TABLE)
def test_every_openpai_state_has_a_status_a_failure_kind_and_a_reason(
    state: str, code: int | None, exit_type: str | None, status: TrialStatus, kind: FailureKind | None
) -> None:
    meaning = openpai_state_meaning(state, code, exit_type)
    assert (meaning.status, meaning.failure_kind) == (status, kind)
    assert meaning.reason


def test_a_stop_is_told_apart_from_a_failure() -> None:
    stopped, failed = PaiJob.from_detail(JOBS["stopped"]), PaiJob.from_detail(JOBS["failed"])
    assert (stopped.state, stopped.exit_code, stopped.ended) == ("STOPPED", -210, True)
    assert stopped.meaning.status is TrialStatus.USER_CANCELED
    assert (failed.state, failed.exit_code, failed.meaning.status) == ("FAILED", 255, TrialStatus.FAILED)


def test_a_failed_job_s_detail_gives_the_command_s_own_exit_code_and_log() -> None:
    job = PaiJob.from_detail(JOBS["failed"])
    assert (job.exit_type, job.exit_phrase, job.user_exit_code) == (
        "UNKNOWN_FAILURE",
        "PAIRuntimeUnknownFailed",
        3,
    )
    assert job.log_tail() == "trialfleet: the trial ended: exit code 3"
    assert job.describe() == (
        "OpenPAI job failed_job FAILED, exit code 255 (PAIRuntimeUnknownFailed), command's exit code 3"
    )


def test_a_job_list_row() -> None:
    job = PaiJob.from_summary(JOBS["list_row"])
    assert (job.name, job.state, job.exit_code, job.virtual_cluster) == (
        "image_job",
        "SUCCEEDED",
        0,
        "default",
    )
    assert job.exit_type is None and job.ended and job.describe() == "OpenPAI job image_job SUCCEEDED"


# ---- how a trial ended ------------------------------------------------------------------------------------


def result(**fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "protocol": 1,
        "exit_code": None,
        "signal": None,
        "end_time": 1.0,
        "canceled": False,
    }
    record.update({"timed_out": False, "reason": "exit code 0"})
    return {**record, **fields}


def outcome(
    result_json: dict[str, Any] | None,
    job: PaiJob | None,
    *,
    keeper_started: bool = True,
    cancel_status: TrialStatus | None = None,
    gone: bool = False,
    single_task: bool = True,
    settled: bool = True,
) -> tuple[TrialStatus, FailureKind | None, int | None, str] | None:
    ended = trial_outcome(
        "t",
        result_json,
        job,
        keeper_started=keeper_started,
        cancel_status=cancel_status,
        gone=gone,
        single_task=single_task,
        settled=settled,
    )
    return None if ended is None else (ended.status, ended.failure_kind, ended.exit_code, ended.message or "")


def job(state: str, code: int | None = None, exit_type: str | None = None, **fields: Any) -> PaiJob:
    return PaiJob("nni_exp_e_trial_t", state, None, code, exit_type, **fields)


def test_the_keeper_s_result_decides_a_single_task_job_at_once() -> None:
    assert outcome(result(exit_code=0), job("RUNNING")) == (TrialStatus.SUCCEEDED, None, 0, "exit code 0")
    failed = outcome(result(exit_code=3, reason="exit code 3"), None)
    assert failed == (TrialStatus.FAILED, USER, 3, "exit code 3")


def test_a_job_of_several_tasks_ends_when_openpai_says_so() -> None:
    assert outcome(result(exit_code=0), job("RUNNING"), single_task=False) is None
    done = outcome(result(exit_code=0), job("SUCCEEDED", 0), single_task=False)
    assert done is not None and done[0] is TrialStatus.SUCCEEDED
    other_failed = outcome(result(exit_code=0), job("FAILED", 220, "USER_FAILURE"), single_task=False)
    assert other_failed is not None and other_failed[:3] == (TrialStatus.FAILED, USER, 0)


def test_our_cancel_ends_the_trial_with_the_status_asked_for() -> None:
    canceled = result(canceled=True, signal=15, reason="canceled")
    ended = outcome(canceled, job("STOPPING"), cancel_status=TrialStatus.EARLY_STOPPED)
    assert ended is not None and ended[:2] == (TrialStatus.EARLY_STOPPED, CANCELED)
    waiting_job = outcome(
        None, job("STOPPED", -210, "USER_STOP"), keeper_started=False, cancel_status=TrialStatus.USER_CANCELED
    )
    assert waiting_job is not None and waiting_job[:2] == (TrialStatus.USER_CANCELED, CANCELED)


def test_a_job_stopped_outside_trialfleet_waits_for_openpai_then_is_user_canceled() -> None:
    canceled = result(canceled=True, signal=15, reason="canceled")
    assert outcome(canceled, job("STOPPING", -210, "USER_STOP")) is None
    ended = outcome(canceled, job("STOPPED", -210, "USER_STOP"))
    assert ended is not None and ended[:2] == (TrialStatus.USER_CANCELED, CANCELED)
    assert "stopped outside trialfleet" in ended[3]
    evicted = outcome(canceled, job("FAILED", -1000, "PLATFORM_FAILURE"))
    assert evicted is not None and evicted[:2] == (TrialStatus.FAILED, INFRA)


def test_a_keeper_that_left_no_result_is_lost_unless_the_job_s_failure_is_the_user_s() -> None:
    killed = outcome(None, job("FAILED", 137, "PLATFORM_FAILURE", exit_phrase="ContainerSigKillReceived"))
    assert killed is not None and killed[:2] == (TrialStatus.FAILED, INFRA)
    assert killed[3].startswith("lost: the trial keeper ended without a final record (OpenPAI job")
    oom = outcome(None, job("FAILED", -1200, "USER_FAILURE"))
    assert oom is not None and oom[:2] == (TrialStatus.FAILED, USER)


def test_a_job_that_failed_before_the_keeper_started_says_why() -> None:
    log = "Error: image msranni/nni:nope not found"
    failed = outcome(None, job("FAILED", 254, "USER_FAILURE", user_log=log), keeper_started=False)
    assert failed is not None and failed[:2] == (TrialStatus.FAILED, USER)
    assert failed[3].endswith(f"before the trial keeper started: {log}")
    odd = outcome(None, job("SUCCEEDED", 0), keeper_started=False)
    assert odd is not None and odd[:2] == (TrialStatus.FAILED, INFRA)


def test_a_task_that_found_no_trial_directory_names_the_storage_problem() -> None:
    log = "trialfleet: /mnt/x/e/trials/t/openpai-task.sh is not on storage nfs in this container (mounted at /mnt/x)"
    missing = job("FAILED", 255, "UNKNOWN_FAILURE", user_exit_code=STORAGE_MISSING_EXIT, user_log=log + "\n")
    ended = outcome(None, missing, keeper_started=False)
    assert ended is not None and ended[:2] == (TrialStatus.FAILED, USER)
    assert "found no trial directory on the storage" in ended[3] and log in ended[3]


def test_an_ended_job_waits_for_result_json_until_settled() -> None:
    assert outcome(None, job("SUCCEEDED", 0), settled=False) is None
    assert result_grace(job("SUCCEEDED", 0), keeper_started=True) == RESULT_GRACE_AFTER_SUCCESS
    assert result_grace(job("FAILED", 255), keeper_started=True) == RESULT_GRACE
    assert result_grace(job("SUCCEEDED", 0), keeper_started=False) == RESULT_GRACE


def test_a_job_openpai_forgot_is_lost_unless_canceled_by_trialfleet() -> None:
    gone = outcome(None, None, gone=True)
    assert gone is not None and gone[:2] == (TrialStatus.FAILED, INFRA) and gone[3].startswith("lost:")
    canceled = outcome(None, None, gone=True, cancel_status=TrialStatus.USER_CANCELED)
    assert canceled is not None and canceled[:2] == (TrialStatus.USER_CANCELED, CANCELED)
    # the keeper was signalled, not by trialfleet, and OpenPAI forgot the job: its pods went with it
    signalled = outcome(result(canceled=True, signal=15, reason="canceled"), None, gone=True)
    assert signalled == (
        TrialStatus.FAILED,
        INFRA,
        None,
        "lost: OpenPAI no longer knows the job and its trial keeper was ended from outside (canceled)",
    )
    ours = outcome(result(canceled=True), None, gone=True, cancel_status=TrialStatus.USER_CANCELED)
    assert ours is not None and ours[:2] == (TrialStatus.USER_CANCELED, CANCELED)


def test_a_live_job_without_result_has_not_ended() -> None:
    for state in ("WAITING", "RUNNING", "STOPPING", "UNKNOWN"):
        assert outcome(None, job(state)) is None
    assert outcome(None, None) is None


def test_the_waiting_reason_shows_the_virtual_cluster_s_usage() -> None:
    waiting = job("WAITING", virtual_cluster="vc1")
    assert waiting_reason(waiting, None) == "waiting in OpenPAI's queue (virtual cluster vc1)"
    usage = {
        "resourcesUsed": {"cpu": 4, "memory": 8192, "gpu": 0},
        "resourcesTotal": {"cpu": 4, "memory": 8192, "gpu": 0},
    }
    assert waiting_reason(waiting, usage) == (
        "waiting for resources in virtual cluster vc1 (cpu 4 of 4, memory 8192 of 8192 MB, gpu 0 of 0 in use)"
    )


def test_a_reporting_task_stopped_because_another_role_finished_is_never_succeeded() -> None:
    """Two task roles: ``ps`` finished first, OpenPAI ended the job (SUCCEEDED) and stopped the reporting worker."""
    stopped = result(canceled=True, signal=15, reason="canceled by signal 15")
    for single_task in (True, False):
        ended = outcome(stopped, job("SUCCEEDED", 0), single_task=single_task)
        assert ended is not None and ended[:2] == (TrialStatus.FAILED, USER), ended
        assert "did not finish (canceled by signal 15)" in ended[3] and "completion policy" in ended[3]


def test_a_reporting_task_killed_before_it_recorded_the_cut_is_never_succeeded_nor_waited_for() -> None:
    """Two task roles: OpenPAI ended the job (SUCCEEDED) by ``ps``'s completion policy and the worker's keeper was
    killed before it wrote result.json. A job of several tasks can succeed without the keeper's task script having
    found result.json, so the minute of grace a single-task job's success gets does not apply."""
    succeeded = job("SUCCEEDED", 0)
    assert result_grace(succeeded, keeper_started=True, single_task=False) == RESULT_GRACE
    ended = outcome(None, succeeded, single_task=False)
    assert ended is not None and ended[:2] == (TrialStatus.FAILED, USER), ended
    assert "stopped before it recorded its end" in ended[3] and "yet its job succeeded" in ended[3]
