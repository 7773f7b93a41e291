"""Tuners and assessors: NNI's contracts (``base``), the search-space format (``search_space/``), the built-in
tuners (``tuners/``) and assessors (``assessors/``), and loading of custom ones (``catalog``, ``factory``,
``user_algorithms``, entry points). Importing this package loads no algorithm library (Optuna, scikit-learn, scipy and SMAC are
imported when a tuner or assessor that needs them is built), and none of its own modules until a name is
asked for: ``trialfleet trial ls`` reads only :mod:`trialfleet.tuning.catalog` (the optimize mode), and the
contracts, factory and search-space checks cost the CLI a tenth of its start-up when loaded with it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trialfleet.tuning.moved import install as _keep_old_module_names

if TYPE_CHECKING:
    from trialfleet.tuning.base import (
        Assessor,
        AssessResult,
        HistoryRecord,
        NoMoreTrialError,
        TrialCurve,
        Tuner,
    )
    from trialfleet.tuning.factory import (
        check_algorithm,
        create_assessor,
        create_tuner,
        ignored_assessor_warning,
    )
    from trialfleet.tuning.search_space.validation import validate_search_space
    from trialfleet.tuning.utils import extract_scalar_reward

#: each public name and the module that defines it
_HOMES = {
    **dict.fromkeys(
        ("Assessor", "AssessResult", "HistoryRecord", "NoMoreTrialError", "TrialCurve", "Tuner"), "base"
    ),
    **dict.fromkeys(("check_algorithm", "create_assessor", "create_tuner", "ignored_assessor_warning"), "factory"),
    "validate_search_space": "search_space.validation",
    "extract_scalar_reward": "utils",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
