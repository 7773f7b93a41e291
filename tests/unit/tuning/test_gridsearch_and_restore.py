"""GridSearch enumerates NNI's grid exactly once; every built-in tuner continues its search after restore()."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest

from trialfleet.status import TrialStatus
from trialfleet.tuning import HistoryRecord, NoMoreTrialError, create_tuner
from trialfleet.tuning.search_space import contains

SMALL = {
    "opt": {"_type": "choice", "_value": ["sgd", "adam"]},
    "layers": {"_type": "randint", "_value": [1, 4]},
    "head": {
        "_type": "choice",
        "_value": [{"_name": "linear"}, {"_name": "mlp", "width": {"_type": "choice", "_value": [16, 32]}}],
    },
}


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def exhaust(tuner, start=0):
    proposals = []
    for parameter_id in itertools.count(start):
        try:
            proposals.append(tuner.generate_parameters(parameter_id))
        except NoMoreTrialError:
            return proposals


def key(params):
    return json.dumps(params, sort_keys=True)


def test_gridsearch_enumerates_exactly_the_grid_then_stops():
    heads = [{"_name": "linear"}, {"_name": "mlp", "width": 16}, {"_name": "mlp", "width": 32}]
    expected = [
        {"opt": opt, "layers": layers, "head": head}
        for opt in ("sgd", "adam")
        for layers in (1, 2, 3)
        for head in heads
    ]
    proposals = exhaust(create_tuner(algo("GridSearch"), SMALL))
    assert proposals == expected  # NNI's order: the last parameter varies fastest
    tuner = create_tuner(algo("gridsearch"), SMALL)
    exhaust(tuner)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(99)


def test_gridsearch_refines_continuous_ranges_like_nni():
    # NNI's example: epoch 1 tries the median; epoch 2 adds the quartiles (normal quartiles are +-0.674)
    space = {"x": {"_type": "choice", "_value": [5, 7]}, "y": {"_type": "normal", "_value": [0, 1]}}
    tuner = create_tuner(algo("GridSearch"), space)
    first = [tuner.generate_parameters(i) for i in range(6)]
    assert [p["x"] for p in first] == [5, 7, 5, 5, 7, 7]
    assert [round(p["y"], 3) for p in first] == [0.0, 0.0, -0.674, 0.674, -0.674, 0.674]


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ({"_type": "quniform", "_value": [0, 10, 5]}, [0.0, 5.0, 10.0]),
        ({"_type": "quniform", "_value": [2, 3, 1]}, [2.0, 3.0]),
        ({"_type": "qloguniform", "_value": [1, 100, 25]}, [1.0, 25.0, 50.0, 75.0, 100.0]),
    ],
)
def test_gridsearch_q_ranges_end(spec, values):
    proposals = exhaust(create_tuner(algo("GridSearch"), {"q": spec}))
    assert sorted(p["q"] for p in proposals) == values


def finished(parameter_id, params, value):
    return HistoryRecord(parameter_id, params, value, TrialStatus.SUCCEEDED.value)


def test_restored_gridsearch_never_reproposes_history():
    first = create_tuner(algo("GridSearch"), SMALL)
    history = [first.generate_parameters(i) for i in range(5)]
    records = [finished(i, p, float(i)) for i, p in enumerate(history[:3])]
    records += [HistoryRecord(i, history[i], None, TrialStatus.RUNNING.value) for i in (3, 4)]
    resumed = create_tuner(algo("GridSearch"), SMALL)
    resumed.restore(records)
    rest = exhaust(resumed, start=5)
    assert {key(p) for p in rest}.isdisjoint(key(p) for p in history)
    assert len(rest) + len(history) == 18  # the whole grid, each point once


def test_restored_batch_skips_proposed_sets():
    sets = [{"x": i} for i in range(4)]
    space = {"combine_params": {"_type": "choice", "_value": sets}}
    resumed = create_tuner(algo("Batch"), space)
    resumed.restore([finished(0, sets[0], 1.0), HistoryRecord(1, sets[2], None, TrialStatus.FAILED.value)])
    assert exhaust(resumed, start=2) == [sets[1], sets[3]]


SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-4, 1e-1]},
    "units": {"_type": "quniform", "_value": [16, 128, 16]},
    "act": {"_type": "choice", "_value": ["relu", "tanh"]},
}
CONTINUING = {
    "Random": {"seed": 3},
    "TPE": {"seed": 3, "tpe_args": {"n_startup_jobs": 4}},
    "Anneal": {"seed": 3},
    "Evolution": {"seed": 3, "population_size": 4},
}


@pytest.mark.parametrize("name", sorted(CONTINUING))
def test_restored_tuners_continue(name):
    before = create_tuner(algo(name, **CONTINUING[name]), SPACE)
    records = []
    for parameter_id in range(8):
        params = before.generate_parameters(parameter_id)
        records.append(finished(parameter_id, params, params["lr"] * 10))
    live = before.generate_parameters(8)
    records.append(HistoryRecord(8, live, None, TrialStatus.RUNNING.value))

    after = create_tuner(algo(name, **CONTINUING[name]), SPACE)
    after.restore(records)
    after.receive_trial_result(8, live, 0.5)  # the trial that was live at restore time reports later
    after.trial_end(8, True)
    for parameter_id in range(9, 20):
        params = after.generate_parameters(parameter_id)
        assert contains(SPACE, params)
        after.receive_trial_result(parameter_id, params, 0.1)
        after.trial_end(parameter_id, True)


@pytest.mark.slow
def test_restored_tpe_learned_the_history():
    # minimize (TPE's default) a loss that is low only for act=tanh: after replay, TPE should favour tanh.
    # Over 4 seeds x 20 proposals a tuner that learned nothing picks tanh 40 times (50 or more: p < 2%).
    history = [{"lr": 0.01, "units": 64.0, "act": "tanh" if i % 2 else "relu"} for i in range(30)]
    records = [finished(i, p, 0.0 if p["act"] == "tanh" else 1.0) for i, p in enumerate(history)]
    tanh = 0
    for seed in range(1, 5):
        tuner = create_tuner(algo("TPE", seed=seed, tpe_args={"n_startup_jobs": 5}), SPACE)
        tuner.restore(records)
        tanh += sum(tuner.generate_parameters(30 + i)["act"] == "tanh" for i in range(20))
    assert tanh >= 50
