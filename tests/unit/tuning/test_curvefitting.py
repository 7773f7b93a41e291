"""Curvefitting: extrapolation of learning curves made from NNI's curve families, decisions, and restore."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from trialfleet.status import TrialStatus
from trialfleet.tuning import AssessResult, TrialCurve, create_assessor
from trialfleet.tuning.assessors.curvefitting import predict


def saturating(top, rate, steps):
    return [top - (top - 0.1) * math.exp(-rate * step) for step in range(1, steps + 1)]


def assessor(**class_args):
    return create_assessor(
        SimpleNamespace(name="Curvefitting", class_name=None, code_directory=None, class_args=class_args)
    )


def completed(top=0.95, **class_args):
    curvefitting = assessor(**class_args)
    for step in range(1, 21):
        curvefitting.assess_trial("best", saturating(top, 0.3, 20)[:step])
    curvefitting.trial_end("best", True)
    return curvefitting


@pytest.mark.parametrize(("top", "rate"), [(0.9, 0.3), (0.6, 0.2), (0.95, 0.5), (0.5, 0.3)])
def test_saturating_curves_are_extrapolated_near_their_value_at_epoch_num(top, rate):
    # 8 of 20 steps seen: the median family overshoots by a few hundredths (0.106 for the first case)
    predicted = predict(saturating(top, rate, 8), 20)
    assert predicted is not None
    assert abs(predicted - saturating(top, rate, 20)[-1]) < 0.15


def test_too_few_usable_fits_give_no_prediction():
    assert predict([0.5, -0.5, 0.5, -0.5, 0.5, -0.5], 20) is None


def test_a_curve_heading_below_the_threshold_is_stopped():
    curvefitting = completed()
    low = saturating(0.5, 0.3, 8)
    assert [curvefitting.assess_trial("low", low[:step]) for step in (5, 6, 7)] == [
        AssessResult.Good,  # before start_step (6)
        AssessResult.Bad,
        AssessResult.Bad,
    ]
    good = saturating(0.97, 0.3, 8)
    assert curvefitting.assess_trial("good", good[:6]) is AssessResult.Good


def test_nothing_is_stopped_before_a_trial_completes():
    assert assessor().assess_trial("low", saturating(0.2, 0.3, 10)) is AssessResult.Good


def test_gap_skips_judgements():
    curvefitting = completed(gap=3)
    low = saturating(0.5, 0.3, 10)
    decisions = [curvefitting.assess_trial("low", low[:step]) for step in range(6, 10)]
    assert decisions == [AssessResult.Bad, AssessResult.Good, AssessResult.Good, AssessResult.Bad]


def test_threshold_scales_the_best():
    # predicted ~0.5 against a best of 0.95: stopped at threshold 0.95, kept at threshold 0.5
    low = saturating(0.5, 0.3, 8)
    assert completed(threshold=0.95).assess_trial("low", low) is AssessResult.Bad
    assert completed(threshold=0.5).assess_trial("low", low) is AssessResult.Good


def test_the_best_is_each_completed_trials_own_last_result():
    curvefitting = completed()
    curvefitting.assess_trial("other", saturating(0.2, 0.3, 3))  # assessed last; NNI would take its value
    curvefitting.trial_end("failed", False)
    assert curvefitting.assess_trial("low", saturating(0.5, 0.3, 8)) is AssessResult.Bad


def test_restore_rebuilds_the_best_performance():
    curvefitting = assessor()
    curvefitting.restore(
        [
            TrialCurve("best", saturating(0.95, 0.3, 20), TrialStatus.SUCCEEDED.value),
            TrialCurve("stopped", saturating(0.99, 0.3, 4), TrialStatus.EARLY_STOPPED.value),
        ]
    )
    assert curvefitting.assess_trial("low", saturating(0.5, 0.3, 8)) is AssessResult.Bad
    assert curvefitting.assess_trial("good", saturating(0.97, 0.3, 8)) is AssessResult.Good


def test_three_points_fit_the_three_parameter_families_only():
    # start_step 2 judges a curve of 3 points: the 4-parameter families cannot be fitted to it (scipy raises
    # TypeError), and are skipped as NNI skips them, instead of failing the assessment
    predict(saturating(0.9, 0.3, 3), 20)
