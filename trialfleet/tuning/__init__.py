"""Tuners and assessors: NNI's contracts (``base``), the search-space format (``search_space/``), the built-in
tuners (``tuners/``) and assessors (``assessors/``), and loading of custom ones (``catalog``, ``factory``,
``user_algorithms``, entry points). Importing this package loads no algorithm library (Optuna, scikit-learn, scipy and SMAC are
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
from trialfleet.tuning.moved import install as _keep_old_module_names
from trialfleet.tuning.search_space.validation import validate_search_space
from trialfleet.tuning.utils import extract_scalar_reward

_keep_old_module_names()

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
