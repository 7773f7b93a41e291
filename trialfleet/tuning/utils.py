"""Metric helpers with NNI's names and behaviour (``nni.utils``), shared by the tuners and the shim."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from trialfleet.errors import AlgorithmError

_BAD_METRIC = (
    "Incorrect final result: the final result should be float/int, "
    'or a dict which has a key named "default" whose value is float/int.'
)


class OptimizeMode(str, Enum):
    Minimize = "minimize"
    Maximize = "maximize"


def parse_optimize_mode(value: object, algorithm: str) -> OptimizeMode:
    """``'maximize'``/``'minimize'`` → OptimizeMode; anything else is a classArgs error."""
    try:
        return OptimizeMode(value)
    except ValueError:
        raise AlgorithmError(
            f"{algorithm}: classArgs.optimize_mode must be 'maximize' or 'minimize', got {value!r}"
        ) from None


def extract_scalar_reward(value: Any, scalar_key: str = "default") -> float:
    """A final metric as a number: the number itself, or ``value[scalar_key]`` of a dict.

    Raises RuntimeError (as NNI does) for anything else; custom tuners catch it by that type.
    """
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return value
    if isinstance(value, dict) and isinstance(value.get(scalar_key), (float, int)):
        return value[scalar_key]
    raise RuntimeError(_BAD_METRIC)


def extract_scalar_history(trial_history: Sequence[Any], scalar_key: str = "default") -> list[float]:
    """``extract_scalar_reward`` applied to every intermediate result of a trial."""
    return [extract_scalar_reward(item, scalar_key) for item in trial_history]


def check_seed(seed: object, algorithm: str) -> int | None:
    if seed is None or (isinstance(seed, int) and not isinstance(seed, bool)):
        return seed
    raise AlgorithmError(f"{algorithm}: classArgs.seed must be an integer, got {seed!r}")


def derive_seed(seed: int | None, restored: int) -> int | None:
    """The seed a tuner continues with after restoring ``restored`` proposals (None stays None: unseeded)."""
    return None if seed is None else (seed * 1_000_003 + restored) % 2**31


def check_number(
    value: object, algorithm: str, name: str, *, minimum: float | None = None, positive: bool = False
) -> float:
    """A numeric classArg as a float; ``positive`` requires > 0, ``minimum`` requires >= minimum."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        if (not positive or number > 0) and (minimum is None or number >= minimum):
            return number
    rule = (
        "a positive number" if positive else f"a number >= {minimum}" if minimum is not None else "a number"
    )
    raise AlgorithmError(f"{algorithm}: classArgs.{name} must be {rule}, got {value!r}")


def check_count(value: object, algorithm: str, name: str, minimum: int = 1) -> int:
    """An integer classArg >= ``minimum``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    raise AlgorithmError(f"{algorithm}: classArgs.{name} must be {rule}, got {value!r}")
