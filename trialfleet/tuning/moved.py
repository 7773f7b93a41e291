"""The modules of ``trialfleet.tuning`` that moved into ``tuners/``, ``assessors/`` and ``search_space/``, still
importable by their old names (``trialfleet.tuning.gp_tuner``, a config's ``className:
trialfleet.tuning.medianstop.MedianstopAssessor``): the old name is the moved module itself, imported on first
use. ``trialfleet.tuning.search_space`` is the package now and exports what the module did."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

_PACKAGE = "trialfleet.tuning"

#: old module (below ``trialfleet.tuning``) → where it is now
MOVED = {
    "anneal_tuner": "tuners.anneal",
    "batch_tuner": "tuners.batch",
    "bohb_tuner": "tuners.bohb",
    "gp_tuner": "tuners.gp",
    "gridsearch_tuner": "tuners.gridsearch",
    "hyperband_tuner": "tuners.hyperband",
    "metis_tuner": "tuners.metis",
    "optuna_tuners": "tuners.optuna_base",
    "optuna_algorithms": "tuners.optuna_samplers",
    "pbt_tuner": "tuners.pbt",
    "pbt_perturb": "tuners.pbt_perturb",
    "random_tuner": "tuners.random_search",
    "regularized_evolution_tuner": "tuners.regularized_evolution",
    "smac_tuner": "tuners.smac",
    "successive_halving": "tuners.successive_halving",
    "medianstop": "assessors.medianstop",
    "curvefitting": "assessors.curvefitting",
    "curve_models": "assessors.curve_models",
    "flat_space": "search_space.flat",
    "unit_cube": "search_space.unit_cube",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name and hands out the moved module under it (``sys.modules`` holds the one module under
    both names)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix(f"{_PACKAGE}.")
        if old == fullname or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def exec_module(self, module: ModuleType) -> None:
        # the import system returns what sys.modules holds under the name once this has run
        moved = importlib.import_module(f"{_PACKAGE}.{MOVED[module.__name__.removeprefix(_PACKAGE + '.')]}")
        sys.modules[module.__name__] = moved


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
