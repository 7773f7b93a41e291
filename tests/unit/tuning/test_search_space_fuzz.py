"""Robustness of the search-space parser: whatever a config, a REST update or a corrupted file hands in,
validation and every built-in tuner's ``update_search_space`` fail only with SearchSpaceError/AlgorithmError,
each with a message."""

from __future__ import annotations

import contextlib
import copy
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.tuning.tuning_spaces import search_spaces
from trialfleet.errors import AlgorithmError, SearchSpaceError
from trialfleet.tuning import NoMoreTrialError, create_tuner, validate_search_space
from trialfleet.tuning.catalog import BUILTIN_TUNERS
from trialfleet.tuning.search_space import ALL_TYPES

FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TUNER_FUZZ = settings(FUZZ, max_examples=60)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from([*ALL_TYPES, "_type", "_value", "_name", "choice ", "CHOICE", ""]),
)
keys = st.one_of(st.sampled_from(["_type", "_value", "_name", "x", "y", "layer"]), st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=25,
)

pytestmark = pytest.mark.slow  # hypothesis/schemathesis: the fast tier (-m 'not slow') leaves it out


@st.composite
def near_valid_spaces(draw: st.DrawFn) -> Any:
    """A valid space (nested choices included) with a few entries replaced, added or removed anywhere."""
    space: Any = copy.deepcopy(draw(search_spaces()))
    for _ in range(draw(st.integers(1, 3))):
        containers = list(_containers(space))
        target = draw(st.sampled_from(containers))
        if isinstance(target, list):
            index = draw(st.integers(0, len(target)))
            if index < len(target) and draw(st.booleans()):
                del target[index]
            else:
                target.insert(index, draw(values))
            continue
        action = draw(st.sampled_from(["replace", "add", "remove"]))
        if action != "add" and target:
            key = draw(st.sampled_from(sorted(target, key=str)))
            if action == "remove":
                del target[key]
            else:
                target[key] = draw(values)
        else:
            target[draw(keys)] = draw(values)
    return space


def _containers(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        yield value
        for child in value.values() if isinstance(value, dict) else value:
            yield from _containers(child)


def _refused_cleanly(call: Any, *args: Any) -> Any:
    """``call(*args)``'s result, or None when it refused with one of the two errors and a message."""
    try:
        return call(*args)
    except (SearchSpaceError, AlgorithmError) as error:
        assert str(error).strip(), f"{type(error).__name__} without a message"
        assert getattr(error, "message", "x").strip(), f"{type(error).__name__} with an empty message"
        return None


@FUZZ
@given(space=values)
def test_validate_arbitrary_values(space: Any) -> None:
    _refused_cleanly(validate_search_space, space)


@FUZZ
@given(space=near_valid_spaces())
def test_validate_near_valid_spaces(space: Any) -> None:
    _refused_cleanly(validate_search_space, space)


def _algo(name: str) -> SimpleNamespace:
    # the factory duck-types the config's AlgorithmConfig: these four attributes are its whole interface
    return SimpleNamespace(name=name, class_name=None, code_directory=None, class_args={})


@pytest.mark.parametrize("name", [entry.name for entry in BUILTIN_TUNERS])
@TUNER_FUZZ
@given(space=st.one_of(values, near_valid_spaces()))
def test_builtin_tuners_take_any_space(name: str, space: Any) -> None:
    """A space the tuner accepts must also be one it can propose from."""
    tuner = _refused_cleanly(create_tuner, _algo(name), space)
    if tuner is None:
        return
    with contextlib.suppress(NoMoreTrialError):  # an exhausted grid or batch is a normal answer
        tuner.generate_parameters(0)
