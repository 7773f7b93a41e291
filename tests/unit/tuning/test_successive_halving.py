"""Hyperband and BOHB: NNI's bracket arithmetic, rounds advanced by trial ends, serial vs parallelism, resume."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trialfleet.errors import SearchSpaceError
from trialfleet.status import TrialStatus
from trialfleet.tuning import HistoryRecord, NoMoreTrialError, create_tuner
from trialfleet.tuning.tuners.successive_halving import Bracket

SPACE = {"x": {"_type": "uniform", "_value": [0, 1]}, "c": {"_type": "choice", "_value": ["a", "b"]}}


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def rounds(s_max, eta, max_budget):
    brackets = [Bracket(s, s_max, eta, max_budget) for s in range(s_max, -1, -1)]
    return [[b.size(i) for i in range(b.s + 1)] for b in brackets]


def test_bracket_sizes_follow_nni_code():
    # R=81, eta=3: the Hyperband paper's table (NNI's docstring has 27 for s=3; its code, like the paper, 34)
    assert rounds(4, 3, 81) == [
        [(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)],
        [(34, 3), (11, 9), (3, 27), (1, 81)],
        [(15, 9), (5, 27), (1, 81)],
        [(8, 27), (2, 81)],
        [(5, 81)],
    ]
    # NNI's defaults R=60, eta=3: budgets are floored, r = 60 / 27
    assert rounds(3, 3, 60)[0] == [(27, 2), (9, 6), (3, 20), (1, 60)]


def take_all(tuner, start):
    """Every proposal the tuner has now (it raises NoMoreTrialError when it must wait)."""
    proposals = {}
    parameter_id = start
    while True:
        try:
            proposals[parameter_id] = tuner.generate_parameters(parameter_id)
        except NoMoreTrialError:
            return proposals
        parameter_id += 1


def finish(tuner, proposals, score):
    for parameter_id, params in proposals.items():
        tuner.receive_trial_result(parameter_id, params, score(params))
        tuner.trial_end(parameter_id, True)


def test_serial_hyperband_promotes_the_best_when_a_round_has_ended():
    tuner = create_tuner(
        algo("Hyperband", R=9, eta=3, exec_mode="serial", optimize_mode="minimize", seed=1), SPACE
    )
    first = take_all(tuner, 0)
    assert [p["TRIAL_BUDGET"] for p in first.values()] == [1] * 9
    # the round has not ended: a result alone does not advance it
    tuner.receive_trial_result(0, first[0], 0.5)
    with pytest.raises(NoMoreTrialError, match="waits for the running trials"):
        tuner.generate_parameters(9)
    tuner.trial_end(0, True)
    finish(tuner, {k: v for k, v in first.items() if k != 0}, lambda p: p["x"])
    second = take_all(tuner, 9)
    best3 = sorted(first.values(), key=lambda p: p["x"] if p is not first[0] else 0.5)[:3]
    strip = lambda p: {k: v for k, v in p.items() if k != "TRIAL_BUDGET"}  # noqa: E731
    assert [strip(p) for p in second.values()] == [strip(p) for p in best3]
    assert {p["TRIAL_BUDGET"] for p in second.values()} == {3}
    finish(tuner, second, lambda p: p["x"])
    third = take_all(tuner, 12)
    # the last round of bracket s=2 (1 config at 9) is issued: serial mode then starts bracket s=1 (5 at 3)
    budgets = [p["TRIAL_BUDGET"] for p in third.values()]
    assert budgets == [9, 3, 3, 3, 3, 3]
    assert strip(third[12]) == strip(min(second.values(), key=lambda p: p["x"]))


def test_parallelism_starts_the_next_bracket_instead_of_waiting():
    tuner = create_tuner(algo("Hyperband", R=9, eta=3, seed=1), SPACE)
    proposals = [tuner.generate_parameters(i)["TRIAL_BUDGET"] for i in range(17)]
    # brackets s=2 (9 at 1), s=1 (5 at 3), s=0 (3 at 9); then the cycle starts again with s=2
    assert proposals == [1] * 9 + [3] * 5 + [9] * 3


def test_trials_without_a_result_are_not_promoted():
    tuner = create_tuner(algo("Hyperband", R=3, eta=3, exec_mode="serial", seed=2), SPACE)
    first = take_all(tuner, 0)  # bracket s=1: 3 configs at 1, then 1 at 3
    assert len(first) == 3
    for parameter_id in first:
        tuner.trial_end(parameter_id, False)  # all failed: the bracket stops
    # the next bracket, s=0 (2 at 3), has one round: once it is issued, serial mode goes on with s=1 again
    assert [p["TRIAL_BUDGET"] for p in take_all(tuner, 3).values()] == [3, 3, 1, 1, 1]


def test_bohb_starts_a_bracket_only_when_the_last_round_has_ended():
    tuner = create_tuner(algo("BOHB", min_budget=1, max_budget=3, eta=3, seed=1), SPACE)
    first = take_all(tuner, 0)
    assert [p["TRIAL_BUDGET"] for p in first.values()] == [1, 1, 1]  # s_max = 1: 3 configs at 1
    finish(tuner, first, lambda p: p["x"])
    last_round = take_all(tuner, 3)
    assert [p["TRIAL_BUDGET"] for p in last_round.values()] == [3]
    assert last_round[3]["x"] == max(p["x"] for p in first.values())  # BOHB maximizes by default
    finish(tuner, last_round, lambda p: p["x"])
    assert [p["TRIAL_BUDGET"] for p in take_all(tuner, 4).values()] == [3, 3]  # bracket s=0: 2 configs at 3


@pytest.mark.slow
def test_bohb_model_proposals_follow_the_good_results():
    # maximize x: once a budget has enough results, most proposals come from the model, near x = 1
    tuner = create_tuner(
        algo("BOHB", min_budget=1, max_budget=1, min_points_in_model=4, random_fraction=0.0, seed=3), SPACE
    )
    parameter_id, late = 0, []
    for _ in range(40):
        proposals = take_all(tuner, parameter_id)
        parameter_id += len(proposals)
        finish(tuner, proposals, lambda p: p["x"])
        if parameter_id > 20:
            late += [p["x"] for p in proposals.values()]
    assert sum(late) / len(late) > 0.7


def test_restore_continues_the_bracket():
    args = {"R": 9, "eta": 3, "exec_mode": "serial", "optimize_mode": "minimize", "seed": 4}
    before = create_tuner(algo("Hyperband", **args), SPACE)
    first = take_all(before, 0)
    finish(before, first, lambda p: p["x"])
    promoted = take_all(before, 9)
    records = [HistoryRecord(i, p, p["x"], TrialStatus.SUCCEEDED.value) for i, p in first.items()]
    records += [HistoryRecord(i, promoted[i], None, TrialStatus.RUNNING.value) for i in (9, 10)]

    after = create_tuner(algo("Hyperband", **{**args, "seed": 99}), SPACE)
    after.restore(records)
    assert after.generate_parameters(11) == promoted[11]  # the third promoted config, not yet proposed
    finish(after, {9: promoted[9], 10: promoted[10], 11: promoted[11]}, lambda p: p["x"])
    final = after.generate_parameters(12)
    assert final["TRIAL_BUDGET"] == 9
    assert final["x"] == min(p["x"] for p in promoted.values())


def test_budget_key_cannot_be_a_parameter():
    with pytest.raises(SearchSpaceError, match="'TRIAL_BUDGET': tuner Hyperband passes the budget"):
        create_tuner(algo("Hyperband"), {"TRIAL_BUDGET": {"_type": "choice", "_value": [1]}})
