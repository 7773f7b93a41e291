"""The bridge to trialfleet for the names that only make sense in the manager process.

Tuners, assessors and the experiment API are trialfleet's own classes; ``nni.tuner`` and friends
re-export them. They are imported on first use so that ``import nni`` in a trial never loads
trialfleet (which is not even installed on most workers).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType


def tuning_base() -> ModuleType:
    """``trialfleet.tuning.base``, with a clear error when trialfleet is not installed."""
    return _import("trialfleet.tuning.base", "tuners and assessors")


def tuning_utils() -> ModuleType:
    """``trialfleet.tuning.utils`` (``OptimizeMode``), with a clear error when trialfleet is not installed."""
    return _import("trialfleet.tuning.utils", "tuner helpers")


def trialfleet_package() -> ModuleType:
    """The ``trialfleet`` package, with a clear error when it is not installed."""
    return _import("trialfleet", "the experiment API")


def _import(module: str, what: str) -> ModuleType:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise
        raise ImportError(
            f"this 'nni' is trialfleet's compatibility shim: {what} come from trialfleet, "
            f"which is not importable here ({exc}). Install trialfleet in this environment."
        ) from exc
