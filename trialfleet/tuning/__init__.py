"""Tuners and assessors: NNI's contracts, the search-space format, the built-in algorithms and loading of
custom ones. Importing this package loads no algorithm library (Optuna, scikit-learn, scipy and SMAC are
imported when a tuner or assessor that needs them is built)."""

from __future__ import annotations

from trialfleet.tuning.base import (
    Assessor,
    AssessResult,
    HistoryRecord,
    NoMoreTrialError,
    TrialCurve,
    Tuner,
)
from trialfleet.tuning.factory import check_algorithm, create_assessor, create_tuner, ignored_assessor_warning
from trialfleet.tuning.search_space import validate_search_space
from trialfleet.tuning.utils import extract_scalar_reward

__all__ = [
    "AssessResult",
    "Assessor",
    "HistoryRecord",
    "NoMoreTrialError",
    "TrialCurve",
    "Tuner",
    "check_algorithm",
    "create_assessor",
    "create_tuner",
    "extract_scalar_reward",
    "ignored_assessor_warning",
    "validate_search_space",
]
