"""NNI's ``nni.utils`` helpers that trial code and custom tuners import.

``OptimizeMode`` is trialfleet's own enum, imported on first use so that trials importing
``merge_parameter`` never load trialfleet.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# OptimizeMode (resolved on first use) stays out of __all__: ``from nni.utils import *`` in a
# trial must not load trialfleet.
__all__ = [
    "ClassArgsValidator",
    "extract_scalar_history",
    "extract_scalar_reward",
    "merge_parameter",
]

_SCALAR_ERROR = (
    "Incorrect final result: the final result should be float/int, "
    'or a dict which has a key named "default" whose value is float/int.'
)


def merge_parameter(base_params: Any, override_params: dict[str, Any] | None) -> Any:
    """Update ``base_params`` (an argparse Namespace or a dict) in place with ``override_params``.

    Every overriding key must already exist in ``base_params`` with the same type (unless the base
    value is None), exactly as NNI checks it; the updated ``base_params`` is returned.
    """
    if override_params is None:
        return base_params
    is_dict = isinstance(base_params, dict)
    for key, value in override_params.items():
        if (key not in base_params) if is_dict else not hasattr(base_params, key):
            raise ValueError(f"Key '{key}' not found in base parameters.")
        current = base_params[key] if is_dict else getattr(base_params, key)
        if current is not None and type(current) is not type(value):
            raise TypeError(
                f"Expected '{key}' in override parameters to have type '{type(current)}', "
                f"but found '{type(value)}'."
            )
        if is_dict:
            base_params[key] = value
        else:
            setattr(base_params, key, value)
    return base_params


def extract_scalar_reward(value: Any, scalar_key: str = "default") -> float:
    """The number a tuner optimises: ``value`` itself, or ``value[scalar_key]`` for a dict metric."""
    if isinstance(value, (float, int)):
        return value
    if isinstance(value, dict) and isinstance(value.get(scalar_key), (float, int)):
        return value[scalar_key]
    raise RuntimeError(_SCALAR_ERROR)


def extract_scalar_history(trial_history: list[Any], scalar_key: str = "default") -> list[float]:
    """:func:`extract_scalar_reward` applied to every intermediate result."""
    return [extract_scalar_reward(item, scalar_key) for item in trial_history]


class ClassArgsValidator:
    """Base class of a tuner's ``classArgs`` validator (NNI's ``nni.utils.ClassArgsValidator``)."""

    def validate_class_args(self, **kwargs: Any) -> None:
        """Raise an exception when ``kwargs`` (the config's classArgs) are invalid."""

    def choices(self, key: str, *args: Any) -> Any:
        """A ``schema`` rule accepting only ``args`` (needs the ``schema`` package, as NNI's)."""
        from schema import And

        return And(lambda n: n in args, error=f"{key} should be in [{args}]!")

    def range(self, key: str, key_type: type, start: Any, end: Any) -> Any:
        """A ``schema`` rule accepting a ``key_type`` value in ``[start, end]``."""
        from schema import And

        return And(
            And(key_type, error=f"{key} should be {key_type.__name__} type!"),
            And(lambda n: start <= n <= end, error=f"{key} should be in range of ({start}, {end})!"),
        )


def __getattr__(name: str) -> Any:
    if name == "OptimizeMode":
        from ._trialfleet import tuning_utils

        return tuning_utils().OptimizeMode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
