"""Every built-in tuner proposes only parameter sets inside its declared search space, whatever results it hears."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tuning_spaces import search_spaces

from trialfleet.tuning import NoMoreTrialError, create_tuner, validate_search_space
from trialfleet.tuning.search_space import contains

pytestmark = pytest.mark.slow  # hypothesis/schemathesis: the fast tier (-m 'not slow') leaves it out

# tuners that take every type, nested choices included
TUNERS = {
    "Random": {"seed": 1},
    "GridSearch": {},
    "TPE": {"seed": 1, "tpe_args": {"n_startup_jobs": 3}},
    "Anneal": {"seed": 1},
    "Evolution": {"seed": 1, "population_size": 4},
    "RegularizedEvolutionTuner": {"seed": 1, "population_size": 4, "sample_size": 2},
    "Hyperband": {"seed": 1, "R": 9, "eta": 3},
}
# every type, no nesting (as in NNI)
FLAT_TUNERS = {
    "BOHB": {"seed": 1, "max_budget": 9, "min_points_in_model": 2, "num_samples": 8},
    "PBT": {"seed": 1, "population_size": 3, "all_checkpoint_dir": "/nonexistent/ckpt"},
}
# numeric choices and no normal types; small acquisition searches keep the examples quick
NUMERIC_TUNERS = {
    "GP": (
        {"seed": 1, "cold_start_num": 3, "selection_num_warm_up": 200, "selection_num_starting_points": 3},
        ("choice", "randint", "uniform", "quniform", "loguniform", "qloguniform"),
    ),
    "Metis": (
        {"seed": 1, "cold_start_num": 3, "selection_num_starting_points": 20},
        ("choice", "randint", "uniform", "quniform"),
    ),
}
SMAC_TYPES = ("choice", "randint", "uniform", "quniform", "loguniform")
# keys a tuner adds to the parameters beside the search space's (NNI's, read by the trial)
EXTRA_KEYS = {
    "Hyperband": ("TRIAL_BUDGET",),
    "BOHB": ("TRIAL_BUDGET",),
    "PBT": ("load_checkpoint_dir", "save_checkpoint_dir"),
}

_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_slow_settings = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def drive(name, tuner, space, rewards, proposals=12):
    for parameter_id in range(proposals):
        try:
            params = tuner.generate_parameters(parameter_id)
        except NoMoreTrialError:
            return
        extra = {key: params.pop(key) for key in EXTRA_KEYS.get(name, ())}
        assert contains(space, params), params
        check_extra(name, extra)
        tuner.receive_trial_result(parameter_id, {**params, **extra}, rewards[parameter_id % len(rewards)])
        tuner.trial_end(parameter_id, True)


def check_extra(name, extra):
    if "TRIAL_BUDGET" in extra:
        assert isinstance(extra["TRIAL_BUDGET"], int) and 1 <= extra["TRIAL_BUDGET"] <= 9
    if name == "PBT":
        member, step = os.path.split(extra["save_checkpoint_dir"])
        assert os.path.dirname(member) == "/nonexistent/ckpt" and step.isdigit()


_rewards = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False),
        st.integers(-100, 100),
        st.floats(0, 1).map(lambda x: {"default": x, "loss": 1 - x}),
    ),
    min_size=1,
    max_size=5,
)


def numeric_choices(space):
    for spec in space.values():
        if spec["_type"] == "choice":
            spec["_value"] = [i * 1.5 for i, _ in enumerate(spec["_value"])]
    return space


@pytest.mark.parametrize("name", sorted(TUNERS))
@_settings
@given(space=search_spaces(), rewards=_rewards)
def test_proposals_lie_in_the_space(name, space, rewards):
    validate_search_space(space)
    drive(name, create_tuner(algo(name, **TUNERS[name]), space), space, rewards)


@pytest.mark.parametrize("name", sorted(FLAT_TUNERS))
@_settings
@given(space=search_spaces(nested=False), rewards=_rewards)
def test_flat_space_proposals_lie_in_the_space(name, space, rewards):
    drive(name, create_tuner(algo(name, **FLAT_TUNERS[name]), space), space, rewards)


@pytest.mark.parametrize("name", sorted(NUMERIC_TUNERS))
@_slow_settings
@given(data=st.data(), rewards=_rewards)
def test_numeric_proposals_lie_in_the_space(name, data, rewards):
    class_args, types = NUMERIC_TUNERS[name]
    space = numeric_choices(data.draw(search_spaces(nested=False, types=types)))
    drive(name, create_tuner(algo(name, **class_args), space), space, rewards, proposals=6)


@_slow_settings
@given(space=search_spaces(nested=False, types=SMAC_TYPES), rewards=_rewards)
def test_smac_proposals_lie_in_the_space(space, rewards):
    drive("SMAC", create_tuner(algo("SMAC", seed=1, config_dedup=True), space), space, rewards)


@_settings
@given(sets=st.lists(st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), min_size=1, max_size=6))
def test_batch_proposes_each_set_once_in_order(sets):
    tuner = create_tuner(algo("BatchTuner"), {"combine_params": {"_type": "choice", "_value": sets}})
    proposed = [tuner.generate_parameters(i) for i in range(len(sets))]
    assert proposed == sets
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(len(sets))
