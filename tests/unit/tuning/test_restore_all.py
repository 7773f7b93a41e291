"""Every built-in tuner continues a resumed search from restore(): it accepts the results of trials that were
live at restore time and proposes nothing it already proposed; the stateful ones continue exactly where they were."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trialfleet.status import TrialStatus
from trialfleet.tuning import HistoryRecord, NoMoreTrialError, create_tuner
from trialfleet.tuning.catalog import BUILTIN_TUNERS
from trialfleet.tuning.search_space import contains

SPACE = {
    "x": {"_type": "uniform", "_value": [0, 1]},
    "units": {"_type": "quniform", "_value": [16, 128, 16]},
    "k": {"_type": "choice", "_value": [1, 2, 3]},
}
BATCH_SPACE = {
    "combine_params": {"_type": "choice", "_value": [{"x": i / 20, "units": 16, "k": 1} for i in range(20)]}
}
QUICK = {"selection_num_warm_up": 200, "selection_num_starting_points": 3, "cold_start_num": 4}
CLASS_ARGS = {
    "TPE": {"seed": 3, "tpe_args": {"n_startup_jobs": 4}},
    "Random": {"seed": 3},
    "Anneal": {"seed": 3},
    "Evolution": {"seed": 3, "population_size": 4},
    "Batch": {},
    "GridSearch": {},
    "GP": {"seed": 3, **QUICK},
    "Metis": {"seed": 3, "cold_start_num": 4, "selection_num_starting_points": 20},
    "SMAC": {"seed": 3},
    "PBT": {"seed": 3, "population_size": 4, "all_checkpoint_dir": "/ckpt"},
    "RegularizedEvolutionTuner": {"seed": 3, "population_size": 4, "sample_size": 2},
    "Hyperband": {"seed": 3, "R": 9},
    "BOHB": {"seed": 3, "max_budget": 9, "min_points_in_model": 3},
}
EXTRA_KEYS = ("TRIAL_BUDGET", "load_checkpoint_dir", "save_checkpoint_dir")
# NSGA-II's crossover hands parents back unchanged (a plain run of 40 repeats 9 to 18 proposals): for it, the
# check is that the resumed search is not a replay of the first run
REPEATS_BY_DESIGN = {"Evolution"}


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def key(params):
    return json.dumps(params, sort_keys=True)


def metric(params):
    return -((params["x"] - 0.3) ** 2) if "x" in params else 0.0


def record(parameter_id, params, value=None, status=TrialStatus.SUCCEEDED):
    return HistoryRecord(parameter_id, params, value, status.value)


def test_every_builtin_tuner_is_covered():
    assert sorted(CLASS_ARGS) == sorted(entry.name for entry in BUILTIN_TUNERS)


#: model-fitting tuners, seconds each: left to the slow tier
FITTING = {"GP", "Metis", "SMAC"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in FITTING else n for n in sorted(CLASS_ARGS)]
)
def test_restored_tuner_continues_without_reproposing(name):
    space = BATCH_SPACE if name == "Batch" else SPACE
    before = create_tuner(algo(name, **CLASS_ARGS[name]), space)
    proposed, records = [], []
    for parameter_id in range(8):
        params = before.generate_parameters(parameter_id)
        proposed.append(params)
        records.append(record(parameter_id, params, metric(params)))
        before.receive_trial_result(parameter_id, params, metric(params))
        before.trial_end(parameter_id, True)
    live = before.generate_parameters(8)
    records.append(record(8, live, status=TrialStatus.RUNNING))

    after = create_tuner(algo(name, **CLASS_ARGS[name]), space)
    after.restore(records)
    after.receive_trial_result(8, live, metric(live))  # the trial that was live at restore time reports later
    after.trial_end(8, True)
    seen = {key(p) for p in [*proposed, live]}
    repeats = 0
    for parameter_id in range(9, 17):
        try:
            params = after.generate_parameters(parameter_id)
        except NoMoreTrialError:
            break
        repeats += key(params) in seen
        assert name in REPEATS_BY_DESIGN or key(params) not in seen, f"{name} proposed again {params}"
        seen.add(key(params))
        plain = {k: v for k, v in params.items() if k not in EXTRA_KEYS}
        assert plain in BATCH_SPACE["combine_params"]["_value"] if name == "Batch" else contains(space, plain)
        after.receive_trial_result(parameter_id, params, metric(params))
        after.trial_end(parameter_id, True)
    assert repeats < 6


@pytest.mark.slow
def test_restored_gp_learned_the_history():
    history = [{"x": i / 11, "units": 64.0, "k": 2} for i in range(12)]
    records = [record(i, p, metric(p)) for i, p in enumerate(history)]
    tuner = create_tuner(
        algo("GP", seed=1, selection_num_warm_up=2000, selection_num_starting_points=5), SPACE
    )
    tuner.restore(records)
    assert abs(tuner.generate_parameters(12)["x"] - 0.3) < 0.15
