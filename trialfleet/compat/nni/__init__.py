"""trialfleet's ``nni`` compatibility package: NNI 3.0's trial API for unchanged NNI trial code.

When the real ``nni`` is not installed where a trial runs, the platform puts this package's parent
directory on the trial's PYTHONPATH. Importing it costs milliseconds (NNI's takes seconds) and never
imports trialfleet: the trial functions are standard-library only, and the manager-side names
(``Experiment``, ``NoMoreTrialError``, ``nni.tuner``, ``nni.assessor``) are looked up on first use.
"""

from __future__ import annotations

from ._serializer import dump, load, trace
from ._shortcut import choice, loguniform, normal, qloguniform, qnormal, quniform, uniform
from .trial import (
    get_current_parameter,
    get_experiment_id,
    get_next_parameter,
    get_next_parameters,
    get_sequence_id,
    get_trial_id,
    report_final_result,
    report_intermediate_result,
)
from .utils import ClassArgsValidator

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "3.0"

# The lazily resolved names (Experiment, NoMoreTrialError) stay out of __all__ so that
# ``from nni import *`` in a trial does not load trialfleet.
__all__ = [
    "ClassArgsValidator",
    "choice",
    "dump",
    "get_current_parameter",
    "get_experiment_id",
    "get_next_parameter",
    "get_next_parameters",
    "get_sequence_id",
    "get_trial_id",
    "load",
    "loguniform",
    "normal",
    "qloguniform",
    "qnormal",
    "quniform",
    "report_final_result",
    "report_intermediate_result",
    "trace",
    "uniform",
]

_SUBMODULES = ("assessor", "experiment", "trial", "tuner", "utils")


def __getattr__(name: str) -> Any:
    if name == "Experiment":
        from .experiment import Experiment

        return Experiment
    if name == "NoMoreTrialError":
        from ._trialfleet import tuning_base

        return tuning_base().NoMoreTrialError
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
