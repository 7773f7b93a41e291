"""Which direction "best" means for a stored config: shared by the CLI and the web UI."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.tuning.catalog import configured_optimize_mode


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"tuner": {"name": "TPE"}}, "minimize"),  # NNI's TPE default
        ({"tuner": {"name": "tpe", "classArgs": {"optimize_mode": "maximize"}}}, "maximize"),
        ({"tuner": {"name": "Evolution"}}, "maximize"),
        ({"tuner": {"name": "Random", "classArgs": {"optimize_mode": "minimize"}}}, "minimize"),
        ({"tuner": {"className": "my.Tuner", "classArgs": {}}}, "maximize"),
        ({"advisor": {"name": "Hyperband", "classArgs": {"optimize_mode": "minimize"}}}, "minimize"),
        ({}, "maximize"),
    ],
)
def test_direction_from_class_args_then_builtin_default(config: dict[str, Any], expected: str) -> None:
    assert configured_optimize_mode(config) == expected
