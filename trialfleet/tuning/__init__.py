"""Tuners and assessors: NNI's contracts, the search-space format, the built-in algorithms and loading of
custom ones. Importing this package loads no algorithm library (Optuna is imported when a tuner needs it)."""

from __future__ import annotations

from trialfleet.tuning.base import Assessor, AssessResult, HistoryRecord, NoMoreTrialError, Tuner
from trialfleet.tuning.factory import check_algorithm, create_assessor, create_tuner
from trialfleet.tuning.search_space import validate_search_space
from trialfleet.tuning.utils import extract_scalar_reward

__all__ = [
    "AssessResult",
    "Assessor",
    "HistoryRecord",
    "NoMoreTrialError",
    "Tuner",
    "check_algorithm",
    "create_assessor",
    "create_tuner",
    "extract_scalar_reward",
    "validate_search_space",
]
