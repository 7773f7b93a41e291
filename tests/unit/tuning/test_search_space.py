"""Search-space validation (every rule of NNI's format), sampling semantics and the membership check."""

from __future__ import annotations

import math
import random

import pytest

from trialfleet.errors import ConfigError, SearchSpaceError
from trialfleet.tuning import validate_search_space
from trialfleet.tuning.search_space import contains, sample


def one(type_, value):
    return {"p": {"_type": type_, "_value": value}}


# (space, parameter path named in the message, the rule as it appears in the message)
INVALID = [
    pytest.param([1, 2], None, "search space must be a dict", id="space-not-dict"),
    pytest.param({"p": 3}, "p", "must be a dict with '_type' and '_value'", id="spec-not-dict"),
    pytest.param({"p": {"_value": [1]}}, "p", "must be a dict with '_type' and '_value'", id="no-type"),
    pytest.param({"p": {"_type": "choice"}}, "p", "must be a dict with '_type' and '_value'", id="no-value"),
    pytest.param(one("gauss", [0, 1]), "p", "unknown _type 'gauss'", id="unknown-type"),
    pytest.param(one("choice", "abc"), "p", "choice needs _value to be a list", id="value-not-list"),
    pytest.param(one("choice", []), "p", "choice needs at least one option", id="choice-empty"),
    pytest.param(
        one("choice", [1, [2, 3]]), "p", "choice options must be numbers or strings", id="choice-list"
    ),
    pytest.param(one("choice", [None]), "p", "choice options must be numbers or strings", id="choice-null"),
    pytest.param(
        one("choice", [{"_name": "a"}, {"x": 1}]),
        "p",
        "choice options must be numbers or strings",
        id="mixed-nested",
    ),
    pytest.param(one("uniform", [0, 1, 2]), "p", "uniform needs 2 values", id="arity-2"),
    pytest.param(one("quniform", [0, 1]), "p", "quniform needs 3 values", id="arity-3"),
    pytest.param(one("qlognormal", [0, 1]), "p", "qlognormal needs 3 values", id="arity-3-normal"),
    pytest.param(one("randint", [0, 2.5]), "p", "randint needs integers", id="randint-float"),
    pytest.param(one("randint", [True, 3]), "p", "randint needs integers", id="randint-bool"),
    pytest.param(one("uniform", ["0", 1]), "p", "uniform needs numbers", id="uniform-string"),
    pytest.param(one("uniform", [0, math.inf]), "p", "uniform needs finite numbers", id="uniform-inf"),
    pytest.param(one("uniform", [1, 1]), "p", "uniform needs high > low", id="high-eq-low"),
    pytest.param(one("randint", [5, 2]), "p", "randint needs high > low", id="randint-high-lt-low"),
    pytest.param(one("quniform", [3, 1, 1]), "p", "quniform needs high > low", id="quniform-high-lt-low"),
    pytest.param(one("quniform", [0, 1, 0]), "p", "quniform needs q > 0", id="q-zero"),
    pytest.param(one("loguniform", [0, 1]), "p", "loguniform needs low > 0, got [0, 1]", id="log-low-zero"),
    pytest.param(one("qloguniform", [-1, 1, 0.1]), "p", "qloguniform needs low > 0", id="qlog-low-negative"),
    pytest.param(one("normal", [0, 0]), "p", "normal needs sigma > 0", id="sigma-zero"),
    pytest.param(one("qnormal", [0, -1, 1]), "p", "qnormal needs sigma > 0", id="qnormal-sigma-negative"),
    pytest.param(one("lognormal", [1, 0]), "p", "lognormal needs sigma > 0", id="lognormal-sigma-zero"),
    pytest.param(
        {
            "layer": {
                "_type": "choice",
                "_value": [{"_name": "conv", "k": {"_type": "loguniform", "_value": [0, 1]}}],
            }
        },
        "layer.conv.k",
        "loguniform needs low > 0",
        id="nested-path",
    ),
]


@pytest.mark.parametrize(("space", "parameter", "rule"), INVALID)
def test_invalid_space_names_parameter_and_rule(space, parameter, rule):
    with pytest.raises(SearchSpaceError) as caught:
        validate_search_space(space)
    message = str(caught.value)
    assert rule in message
    if parameter is not None:
        assert f"search space parameter '{parameter}':" in message
    assert isinstance(caught.value, ConfigError)


def test_exact_message_for_loguniform_low():
    with pytest.raises(SearchSpaceError) as caught:
        validate_search_space({"lr": {"_type": "loguniform", "_value": [0, 1]}})
    assert caught.value.message == "search space parameter 'lr': loguniform needs low > 0, got [0, 1]"
    assert caught.value.key_path == "searchSpace.lr"


def test_tuner_restrictions_are_named():
    with pytest.raises(SearchSpaceError, match=r"normal is not supported by tuner GP"):
        validate_search_space(one("normal", [0, 1]), ("choice", "uniform"), algorithm="GP")
    nested = one("choice", [{"_name": "a"}])
    with pytest.raises(SearchSpaceError, match=r"nested choice .* is not supported by tuner GP"):
        validate_search_space(nested, nested=False, algorithm="GP")
    with pytest.raises(SearchSpaceError, match=r"choice options must be numbers by tuner GP"):
        validate_search_space(one("choice", ["a", "b"]), numeric_choices=True, algorithm="GP")


VALID_SPACE = {
    "c": {"_type": "choice", "_value": [1, "two", 3.5]},
    "r": {"_type": "randint", "_value": [-2, 3]},
    "u": {"_type": "uniform", "_value": [0, 1]},
    "qu": {"_type": "quniform", "_value": [1, 10, 3]},
    "lu": {"_type": "loguniform", "_value": [1e-3, 10]},
    "qlu": {"_type": "qloguniform", "_value": [1, 100, 10]},
    "n": {"_type": "normal", "_value": [0, 1]},
    "qn": {"_type": "qnormal", "_value": [0, 4, 2]},
    "ln": {"_type": "lognormal", "_value": [0, 1]},
    "qln": {"_type": "qlognormal", "_value": [1, 1, 0.5]},
    "layer": {
        "_type": "choice",
        "_value": [
            {"_name": "conv", "kernel": {"_type": "choice", "_value": [3, 5]}},
            {"_name": "pool"},
        ],
    },
}


@pytest.mark.slow
def test_valid_space_passes_and_samples_stay_inside():
    validate_search_space(VALID_SPACE)
    rng = random.Random(7)
    samples = [sample(VALID_SPACE, rng) for _ in range(500)]
    assert all(contains(VALID_SPACE, s) for s in samples)
    assert {s["r"] for s in samples} == {-2, -1, 0, 1, 2}  # randint is [lower, upper)
    # quniform [1, 10, 3] = clip(round(u / 3) * 3, 1, 10): 1 is a clipped 0; 12 is never reached, so no 10
    assert {s["qu"] for s in samples} == {1.0, 3.0, 6.0, 9.0}
    assert all(s["qlu"] % 10 == 0 or s["qlu"] in (1.0, 100.0) for s in samples)
    assert all(s["qn"] % 2 == 0 for s in samples)
    assert all(s["ln"] > 0 for s in samples)
    layers = {s["layer"]["_name"]: s["layer"] for s in samples}
    assert layers["pool"] == {"_name": "pool"}
    assert set(layers["conv"]) == {"_name", "kernel"} and layers["conv"]["kernel"] in (3, 5)


@pytest.mark.slow
def test_sampling_distributions_follow_nni():
    rng = random.Random(3)
    space = {"lu": {"_type": "loguniform", "_value": [1e-4, 1]}, "n": {"_type": "normal", "_value": [5, 2]}}
    draws = [sample(space, rng) for _ in range(4000)]
    below_1e2 = sum(d["lu"] < 1e-2 for d in draws) / len(draws)
    assert 0.45 < below_1e2 < 0.55  # log-uniform: half of the mass under the geometric midpoint
    mean = sum(d["n"] for d in draws) / len(draws)
    assert 4.8 < mean < 5.2


@pytest.mark.parametrize(
    "params",
    [
        {"c": 2},  # not an option
        {"c": 1, "extra": 0},
        {},
    ],
)
def test_contains_rejects(params):
    assert not contains({"c": {"_type": "choice", "_value": [1, 3]}}, params)


def test_contains_checks_ranges_and_grids():
    assert not contains(one("randint", [0, 3]), {"p": 3})
    assert not contains(one("uniform", [0, 1]), {"p": 1.5})
    assert not contains(one("quniform", [0, 10, 3]), {"p": 4.0})
    assert contains(one("quniform", [0, 10, 3]), {"p": 10.0})
    nested = one("choice", [{"_name": "a", "k": {"_type": "randint", "_value": [0, 2]}}])
    assert contains(nested, {"p": {"_name": "a", "k": 1}})
    assert not contains(nested, {"p": {"_name": "b"}})
    assert not contains(nested, {"p": {"_name": "a"}})
