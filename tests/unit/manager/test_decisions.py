from __future__ import annotations

import pytest

from trialfleet.manager import decisions
from trialfleet.manager.decisions import Budget
from trialfleet.status import ExperimentStatus, TrialStatus


def test_ids_have_nni_shapes() -> None:
    for _ in range(200):
        tid = decisions.new_trial_id()
        assert len(tid) == 5 and tid[0].isalpha() and tid.isalnum()
        eid = decisions.new_experiment_id()
        assert len(eid) == 8 and eid.isalnum() and eid.lower() == eid


@pytest.mark.parametrize(
    ("concurrency", "live", "max_trials", "submitted", "expected"),
    [(4, 0, None, 0, 4), (4, 3, None, 10, 1), (4, 6, None, 0, 0), (4, 0, 10, 8, 2), (4, 0, 10, 10, 0)],
)
def test_new_trials_allowed(
    concurrency: int, live: int, max_trials: int | None, submitted: int, expected: int
) -> None:
    assert decisions.new_trials_allowed(concurrency, live, Budget(max_trials, None), submitted) == expected


def test_budget_by_count_and_duration() -> None:
    assert decisions.budget_exhausted(Budget(5, None), 5, 0)
    assert not decisions.budget_exhausted(Budget(5, None), 4, 1e9)
    assert decisions.budget_exhausted(Budget(None, 60), 0, 60)
    assert not decisions.budget_exhausted(Budget(None, None), 10**6, 1e9)


def test_overdue_trials() -> None:
    running = [("a", 100.0), ("b", 150.0), ("c", None)]
    assert decisions.overdue_trials(running, 200.0, 60) == ["a"]
    assert decisions.overdue_trials(running, 200.0, None) == []


@pytest.mark.parametrize(
    ("budget_done", "tuner_done", "live", "expected"),
    [
        (False, False, 3, ExperimentStatus.RUNNING),
        (True, False, 3, ExperimentStatus.NO_MORE_TRIAL),
        (False, True, 1, ExperimentStatus.TUNER_NO_MORE_TRIAL),
        (True, False, 0, ExperimentStatus.DONE),
        (False, True, 0, ExperimentStatus.DONE),
    ],
)
def test_status_flow(budget_done: bool, tuner_done: bool, live: int, expected: ExperimentStatus) -> None:
    got = decisions.experiment_status_after(
        ExperimentStatus.RUNNING, budget_done=budget_done, tuner_done=tuner_done, live_trials=live
    )
    assert got is expected


def test_terminal_experiment_states_are_kept() -> None:
    for status in (ExperimentStatus.ERROR, ExperimentStatus.STOPPED, ExperimentStatus.VIEWED):
        assert (
            decisions.experiment_status_after(status, budget_done=True, tuner_done=True, live_trials=0)
            is status
        )


@pytest.mark.parametrize(
    ("status", "kind", "attempt", "max_retries", "user", "expected"),
    [
        (TrialStatus.FAILED, "infrastructure", 0, 2, False, True),
        (TrialStatus.FAILED, "infrastructure", 2, 2, False, False),
        (TrialStatus.FAILED, "user_code", 0, 2, False, False),
        (TrialStatus.FAILED, "user_code", 0, 2, True, True),
        (TrialStatus.USER_CANCELED, "canceled", 0, 2, True, False),
        (TrialStatus.FAILED, "infrastructure", 0, 0, False, False),
    ],
)
def test_retry_policy(
    status: TrialStatus, kind: str, attempt: int, max_retries: int, user: bool, expected: bool
) -> None:
    assert decisions.should_retry(status, kind, attempt, max_retries, user) is expected


def test_scalar_of_metric_values() -> None:
    assert decisions.scalar_of(0.5) == 0.5
    assert decisions.scalar_of({"default": 2, "other": 1}) == 2.0
    assert decisions.scalar_of({"loss": 1}) is None
    assert decisions.scalar_of(True) is None
    assert decisions.scalar_of(float("nan")) is None


def test_contiguous_history() -> None:
    assert decisions.contiguous_history({0: 1, 1: 2}) == [1, 2]
    assert decisions.contiguous_history({0: 1, 2: 3}) is None
    assert decisions.contiguous_history({}) is None


def test_contiguous_prefix() -> None:
    assert decisions.contiguous_prefix({0: 1, 1: 2, 3: 4}) == [1, 2]
    assert decisions.contiguous_prefix({1: 2}) == []
