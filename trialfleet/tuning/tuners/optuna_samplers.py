"""The Optuna-backed built-ins and how NNI's classArgs map onto each sampler.

- ``TPE`` → ``TPESampler`` with NNI's TPE settings: ``n_startup_jobs`` (20), ``n_ei_candidates`` (24),
  ``prior_weight`` (1.0), and NNI's split ``min(ceil(gamma * sqrt(n)), linear_forgetting)`` with NNI's linear
  forgetting weights. ``constant_liar_type`` other than null turns on Optuna's constant liar, which always
  assumes running trials are bad (NNI's ``best``/``mean`` liars have no Optuna counterpart).
- ``Evolution`` → ``NSGAIISampler`` (a genetic algorithm; single objective here) with ``population_size``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import warnings
from typing import TYPE_CHECKING, Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.tuners.optuna_base import OptunaTuner

if TYPE_CHECKING:
    import numpy
    import optuna

_logger = logging.getLogger(__name__)

TPE_ARGS: dict[str, Any] = {
    "constant_liar_type": "best",
    "n_startup_jobs": 20,
    "n_ei_candidates": 24,
    "linear_forgetting": 25,
    "prior_weight": 1.0,
    "gamma": 0.25,
}


class TpeTuner(OptunaTuner):
    algorithm_name = "TPE"

    def __init__(
        self, optimize_mode: str = "minimize", seed: int | None = None, tpe_args: dict[str, Any] | None = None
    ) -> None:
        super().__init__(optimize_mode, seed)
        self._args = _tpe_args(tpe_args or {})

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        from optuna.samplers import TPESampler

        args = self._args
        options = {
            "seed": self._seed,
            "n_startup_trials": args["n_startup_jobs"],
            "n_ei_candidates": args["n_ei_candidates"],
            "constant_liar": args["constant_liar_type"] is not None,
            # deprecated in Optuna 4.9 (removal planned for 6.0): passed while the installed Optuna has them
            "prior_weight": args["prior_weight"],
            "gamma": functools.partial(_nni_gamma, args["gamma"], args["linear_forgetting"]),
            "weights": functools.partial(_nni_weights, args["linear_forgetting"]),
        }
        accepted = inspect.signature(TPESampler).parameters
        dropped = sorted(set(options) - set(accepted))
        if dropped:
            _logger.warning(
                "TPE: this Optuna version has no %s; NNI's settings for them are not applied", dropped
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return TPESampler(**{key: value for key, value in options.items() if key in accepted})


class EvolutionTuner(OptunaTuner):
    algorithm_name = "Evolution"

    def __init__(
        self, optimize_mode: str = "maximize", population_size: int = 32, seed: int | None = None
    ) -> None:
        super().__init__(optimize_mode, seed)
        if not isinstance(population_size, int) or isinstance(population_size, bool) or population_size < 2:
            raise AlgorithmError(
                f"Evolution: classArgs.population_size must be an integer >= 2, got {population_size!r}"
            )
        self._population_size = population_size

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        from optuna.samplers import NSGAIISampler

        return NSGAIISampler(population_size=self._population_size, seed=self._seed)


def _tpe_args(given: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise AlgorithmError(f"TPE: classArgs.tpe_args must be a mapping, got {given!r}")
    unknown = sorted(set(given) - set(TPE_ARGS))
    if unknown:
        raise AlgorithmError(
            f"TPE: unknown classArgs.tpe_args key(s) {', '.join(unknown)} (accepted: {', '.join(TPE_ARGS)})"
        )
    args = {**TPE_ARGS, **given}
    if args["constant_liar_type"] not in (None, "best", "worst", "mean"):
        raise AlgorithmError(
            f"TPE: tpe_args.constant_liar_type must be best, worst, mean or null, got {args['constant_liar_type']!r}"
        )
    for key in ("n_startup_jobs", "n_ei_candidates", "linear_forgetting"):
        if not isinstance(args[key], int) or isinstance(args[key], bool) or args[key] < 1:
            raise AlgorithmError(f"TPE: tpe_args.{key} must be a positive integer, got {args[key]!r}")
    for key in ("prior_weight", "gamma"):
        if not isinstance(args[key], (int, float)) or isinstance(args[key], bool) or args[key] <= 0:
            raise AlgorithmError(f"TPE: tpe_args.{key} must be a positive number, got {args[key]!r}")
    return args


def _nni_gamma(gamma: float, linear_forgetting: int, n: int) -> int:
    return min(math.ceil(gamma * math.sqrt(n)), linear_forgetting)


def _nni_weights(linear_forgetting: int, n: int) -> numpy.ndarray:
    import numpy as np

    if n < linear_forgetting:
        return np.ones(n)
    ramp = np.linspace(1.0 / n, 1.0, n - linear_forgetting)
    return np.concatenate([ramp, np.ones(linear_forgetting)])
