"""Medianstop decisions on hand-made histories; the medians are worked out by hand in the comments."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trialfleet.errors import AlgorithmError
from trialfleet.status import TrialStatus
from trialfleet.tuning import AssessResult, TrialCurve, create_assessor

# completed trials and their running averages:
#   A [1, 2, 3] -> [1, 1.5, 2]     B [3, 3, 3] -> [3, 3, 3]     C [0, 4, 5] -> [0, 2, 3]
COMPLETED = {"A": [1, 2, 3], "B": [3, 3, 3], "C": [0, 4, 5]}
# the same plus D [4, 4] -> [4, 4]: at step 2 the averages are [1.5, 2, 3, 4]
WITH_D = {**COMPLETED, "D": [4, 4]}


def medianstop(completed, **class_args):
    algo = SimpleNamespace(name="Medianstop", class_name=None, code_directory=None, class_args=class_args)
    assessor = create_assessor(algo)
    for trial_id, history in completed.items():
        for step in range(1, len(history) + 1):
            assessor.assess_trial(trial_id, history[:step])
        assessor.trial_end(trial_id, True)
    return assessor


CASES = [
    # step 1 averages [1, 3, 0] -> sorted [0, 1, 3], median 1
    pytest.param(COMPLETED, {}, [2], AssessResult.Good, id="step1-above-median"),
    pytest.param(COMPLETED, {}, [0.5], AssessResult.Bad, id="step1-below-median"),
    pytest.param(COMPLETED, {}, [1], AssessResult.Good, id="equal-to-median-is-good"),
    # step 2 averages [1.5, 3, 2] -> sorted [1.5, 2, 3], median 2; the trial's best so far counts, not its last
    pytest.param(COMPLETED, {}, [1, 1.2], AssessResult.Bad, id="step2-best-below"),
    pytest.param(COMPLETED, {}, [2.5, 0], AssessResult.Good, id="step2-best-above"),
    # no completed trial reached step 4
    pytest.param(COMPLETED, {}, [0, 0, 0, 0], AssessResult.Good, id="beyond-completed"),
    # even count [1.5, 2, 3, 4]: maximize compares to the lower median 2, minimize to the upper median 3
    pytest.param(WITH_D, {}, [1.9, 1.9], AssessResult.Bad, id="even-maximize-lower-median"),
    pytest.param(WITH_D, {}, [2, 2], AssessResult.Good, id="even-maximize-at-median"),
    pytest.param(
        WITH_D, {"optimize_mode": "minimize"}, [3.1, 3.1], AssessResult.Bad, id="even-minimize-upper"
    ),
    pytest.param(WITH_D, {"optimize_mode": "minimize"}, [5, 3], AssessResult.Good, id="minimize-best-is-min"),
    # before start_step nothing is stopped
    pytest.param(COMPLETED, {"start_step": 3}, [-9, -9], AssessResult.Good, id="before-start-step"),
    pytest.param(COMPLETED, {"start_step": 3}, [-9, -9, -9], AssessResult.Bad, id="at-start-step"),
    # dict metrics are read through their 'default' key
    pytest.param(COMPLETED, {}, [{"default": 0.5, "acc": 9}], AssessResult.Bad, id="dict-metric"),
    pytest.param({}, {}, [-100], AssessResult.Good, id="no-completed-trials"),
]


@pytest.mark.parametrize(("completed", "class_args", "history", "expected"), CASES)
def test_decision(completed, class_args, history, expected):
    assert medianstop(completed, **class_args).assess_trial("X", history) is expected


def test_failed_and_unassessed_trials_do_not_count():
    assessor = medianstop({})
    assessor.assess_trial("F", [10])
    assessor.trial_end("F", False)  # failed: not a completed trial
    assessor.trial_end("never-assessed", True)
    assert assessor.assess_trial("X", [-1]) is AssessResult.Good


def test_bad_class_args():
    with pytest.raises(AlgorithmError, match="optimize_mode must be 'maximize' or 'minimize', got 'max'"):
        medianstop({}, optimize_mode="max")
    with pytest.raises(AlgorithmError, match=r"start_step must be an integer in \[0, 9999\]"):
        medianstop({}, start_step=-1)
    with pytest.raises(AlgorithmError, match="unknown classArgs threshold"):
        medianstop({}, threshold=0.9)


def curve(trial_id, history, status):
    return TrialCurve(trial_id, history, status.value)


def test_restore_rebuilds_the_completed_trials():
    # the same knowledge as medianstop(COMPLETED): three succeeded trials, plus ones that must not count
    restored = create_assessor(
        SimpleNamespace(name="Medianstop", class_name=None, code_directory=None, class_args={})
    )
    restored.restore(
        [
            curve("A", [1, 2, 3], TrialStatus.SUCCEEDED),
            curve("F", [9, 9, 9], TrialStatus.FAILED),
            curve("B", [{"default": 3}, 3, 3], TrialStatus.SUCCEEDED),
            curve("E", [9, 9, 9], TrialStatus.EARLY_STOPPED),
            curve("C", [0, 4, 5], TrialStatus.SUCCEEDED),
            curve("N", [], TrialStatus.SUCCEEDED),
        ]
    )
    live = medianstop(COMPLETED)
    for history in ([2], [0.5], [1, 1.2], [2.5, 0], [0, 0, 0, 0]):
        assert restored.assess_trial("X", history) is live.assess_trial("X", history)


def test_restore_keeps_a_running_trial_until_it_ends():
    assessor = medianstop({})
    assessor.restore([curve("R", [4, 4], TrialStatus.RUNNING)])
    assessor.trial_end("R", True)  # it completes after the resume: now it counts
    assert assessor.assess_trial("X", [3]) is AssessResult.Bad
