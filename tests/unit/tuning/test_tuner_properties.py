"""Every built-in tuner proposes only parameter sets inside its declared search space, whatever results it hears."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tuning_spaces import search_spaces

from trialfleet.tuning import NoMoreTrialError, create_tuner, validate_search_space
from trialfleet.tuning.search_space import contains

TUNERS = {
    "Random": {"seed": 1},
    "GridSearch": {},
    "TPE": {"seed": 1, "tpe_args": {"n_startup_jobs": 3}},
    "Anneal": {"seed": 1},
    "Evolution": {"seed": 1, "population_size": 4},
}
GP_TYPES = ("choice", "randint", "uniform", "quniform", "loguniform", "qloguniform")

_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def algo(name, **class_args):
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args=class_args)


def drive(tuner, space, rewards, proposals=12):
    for parameter_id in range(proposals):
        try:
            params = tuner.generate_parameters(parameter_id)
        except NoMoreTrialError:
            return
        assert contains(space, params), params
        tuner.receive_trial_result(parameter_id, params, rewards[parameter_id % len(rewards)])
        tuner.trial_end(parameter_id, True)


_rewards = st.lists(
    st.one_of(
        st.floats(-1e6, 1e6, allow_nan=False),
        st.integers(-100, 100),
        st.floats(0, 1).map(lambda x: {"default": x, "loss": 1 - x}),
    ),
    min_size=1,
    max_size=5,
)


@pytest.mark.parametrize("name", sorted(TUNERS))
@_settings
@given(space=search_spaces(), rewards=_rewards)
def test_proposals_lie_in_the_space(name, space, rewards):
    validate_search_space(space)
    drive(create_tuner(algo(name, **TUNERS[name]), space), space, rewards)


@_settings
@given(space=search_spaces(nested=False, types=GP_TYPES), rewards=_rewards)
def test_gp_proposals_lie_in_the_space(space, rewards):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(
            "GP needs PyTorch, which is not installed: test_factory checks that GP is refused clearly"
        )
    for spec in space.values():  # GP takes numeric choices only
        if spec["_type"] == "choice":
            spec["_value"] = [i for i, _ in enumerate(spec["_value"])]
    drive(create_tuner(algo("GP", seed=1, cold_start_num=3), space), space, rewards)


@_settings
@given(sets=st.lists(st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), min_size=1, max_size=6))
def test_batch_proposes_each_set_once_in_order(sets):
    tuner = create_tuner(algo("BatchTuner"), {"combine_params": {"_type": "choice", "_value": sets}})
    proposed = [tuner.generate_parameters(i) for i in range(len(sets))]
    assert proposed == sets
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(len(sets))
