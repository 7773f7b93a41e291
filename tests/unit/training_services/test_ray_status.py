"""Ray's job states → trialfleet's, how a trial ended, and the batched, backed-off job watcher (no cluster)."""

from __future__ import annotations

import asyncio

import pytest

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.ray.status import JobWatcher, RayJob, ray_state_meaning, trial_outcome

INFRA, USER, CANCELED = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE, FailureKind.CANCELED


@pytest.mark.parametrize(
    ("status", "error_type", "expected", "kind"),
    [
        ("PENDING", None, TrialStatus.WAITING, None),
        ("RUNNING", None, TrialStatus.RUNNING, None),
        ("SUCCEEDED", None, TrialStatus.SUCCEEDED, None),
        ("STOPPED", None, TrialStatus.USER_CANCELED, CANCELED),
        ("FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR", TrialStatus.FAILED, USER),
        ("FAILED", "JOB_ENTRYPOINT_COMMAND_START_ERROR", TrialStatus.FAILED, INFRA),
        ("FAILED", "RUNTIME_ENV_SETUP_FAILURE", TrialStatus.FAILED, INFRA),
        ("FAILED", "JOB_SUPERVISOR_ACTOR_DIED", TrialStatus.FAILED, INFRA),
        ("FAILED", "JOB_SUPERVISOR_ACTOR_START_TIMEOUT", TrialStatus.FAILED, INFRA),
        ("FAILED", "JOB_SUPERVISOR_ACTOR_START_FAILURE", TrialStatus.FAILED, INFRA),
        ("FAILED", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE", TrialStatus.FAILED, INFRA),
        ("FAILED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE", TrialStatus.FAILED, INFRA),
        ("FAILED", "A_TYPE_OF_A_NEWER_RAY", TrialStatus.FAILED, INFRA),
        ("FAILED", None, TrialStatus.FAILED, INFRA),
        ("SOMETHING_NEW", None, TrialStatus.UNKNOWN, None),
    ],
)
def test_ray_state_table(
    status: str, error_type: str | None, expected: TrialStatus, kind: FailureKind | None
) -> None:
    meaning = ray_state_meaning(status, error_type)
    assert (meaning.status, meaning.failure_kind) == (expected, kind)
    assert meaning.reason


def job(status: str, error_type: str | None = None, **kw) -> RayJob:
    return RayJob(
        "sid", status, error_type, kw.pop("message", "Ray's words"), node_id=kw.pop("node", "n1"), **kw
    )


RESULT_EXIT_3 = {"exit_code": 3, "signal": None, "reason": "exit code 3", "canceled": False, "end_time": 5.0}


def outcome(result=None, ray_job=None, *, keeper=True, cancel=None, gone=False, drained=True):
    return trial_outcome(
        "t", result, ray_job, keeper_started=keeper, cancel_status=cancel, gone=gone, drained=drained
    )


def test_the_keepers_result_decides_whatever_ray_says() -> None:
    for ray_job in (None, job("RUNNING"), job("FAILED", "JOB_SUPERVISOR_ACTOR_DIED")):
        ended = outcome(RESULT_EXIT_3, ray_job)
        assert ended is not None and (ended.status, ended.exit_code, ended.failure_kind) == (
            TrialStatus.FAILED,
            3,
            USER,
        )


def test_nothing_is_known_while_the_job_lives_or_its_log_is_not_read_to_the_end() -> None:
    assert outcome(None, None) is None
    assert outcome(None, job("PENDING", node=None)) is None
    assert outcome(None, job("RUNNING")) is None
    assert outcome(None, job("FAILED", "JOB_SUPERVISOR_ACTOR_DIED"), drained=False) is None


def test_a_lost_node_is_an_infrastructure_failure_with_rays_message() -> None:
    ended = outcome(None, job("FAILED", "JOB_SUPERVISOR_ACTOR_DIED", message="Job supervisor actor died: x"))
    assert ended is not None and (ended.status, ended.failure_kind) == (TrialStatus.FAILED, INFRA)
    assert ended.message is not None and "Job supervisor actor died" in ended.message


def test_runtime_env_failure_is_infrastructure() -> None:
    ended = outcome(None, job("FAILED", "RUNTIME_ENV_SETUP_FAILURE", node=None), keeper=False)
    assert ended is not None and (ended.status, ended.failure_kind) == (TrialStatus.FAILED, INFRA)


def test_a_keeper_killed_without_a_record_is_lost() -> None:
    ended = outcome(None, job("FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR", exit_code=-9))
    assert ended is not None and ended.failure_kind is INFRA and ended.message.startswith("lost")


def test_an_entrypoint_that_failed_before_the_keeper_is_infrastructure() -> None:
    ended = outcome(None, job("FAILED", "JOB_ENTRYPOINT_COMMAND_ERROR", exit_code=127), keeper=False)
    assert ended is not None and (ended.status, ended.exit_code, ended.failure_kind) == (
        TrialStatus.FAILED,
        127,
        INFRA,
    )


def test_a_job_ray_forgot_is_lost_unless_it_was_cancelled() -> None:
    ended = outcome(None, None, gone=True)
    assert ended is not None and ended.failure_kind is INFRA and ended.message.startswith("lost")
    ended = outcome(None, None, gone=True, cancel=TrialStatus.EARLY_STOPPED)
    assert ended is not None and ended.status is TrialStatus.EARLY_STOPPED


def test_cancelled_jobs_end_when_stopped_or_while_unplaced() -> None:
    assert outcome(None, job("RUNNING"), cancel=TrialStatus.USER_CANCELED) is None
    for ray_job in (job("STOPPED"), job("PENDING", node=None)):
        ended = outcome(None, ray_job, cancel=TrialStatus.USER_CANCELED, keeper=False)
        assert ended is not None and (ended.status, ended.failure_kind) == (
            TrialStatus.USER_CANCELED,
            CANCELED,
        )


def test_a_job_stopped_outside_trialfleet_is_user_canceled() -> None:
    ended = outcome(None, job("STOPPED"))
    assert ended is not None and (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, CANCELED)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_watcher_asks_once_per_due_query_backs_off_and_declares_jobs_gone() -> None:
    answers: list[dict[str, RayJob] | Exception] = []
    queries = 0

    async def query() -> dict[str, RayJob]:
        nonlocal queries
        queries += 1
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = Clock()
    watcher = JobWatcher(query, min_interval=1.0, max_interval=4.0, clock=clock)
    watcher.watch("a")
    watcher.watch("b")
    answers.append({"a": RayJob("a", "RUNNING"), "b": RayJob("b", "PENDING")})
    await watcher.refresh()
    await watcher.refresh()  # not due yet
    assert queries == 1 and watcher.jobs["a"].status == "RUNNING"
    clock.now = 1.0
    answers.append({"a": RayJob("a", "RUNNING"), "b": RayJob("b", "PENDING")})
    await watcher.refresh()
    clock.now = 2.0
    await watcher.refresh()  # unchanged: the next query waits 1.5 s
    assert queries == 2
    clock.now = 2.5
    answers.append(PlatformError("connection refused"))
    await watcher.refresh()
    assert queries == 3 and watcher.unreachable is not None and not watcher.gone("a")
    for _ in range(2):
        clock.now += 10
        answers.append({"a": RayJob("a", "SUCCEEDED")})
        await watcher.refresh()
    assert watcher.gone("b") and not watcher.gone("a") and watcher.jobs["a"].status == "SUCCEEDED"
    clock.now += 10
    await watcher.refresh()  # nothing live is left to ask about
    assert queries == 5 and watcher.unreachable is None


def test_watcher_runs_on_the_event_loop() -> None:
    async def never() -> dict[str, RayJob]:
        raise AssertionError("nothing is watched, so nothing is asked")

    asyncio.run(JobWatcher(never).refresh())
