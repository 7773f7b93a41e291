"""``BOHB``: NNI's ``bohb_advisor`` — Hyperband brackets whose new configurations come from a model.

Brackets as in NNI's BOHB (see :mod:`successive_halving`): budgets up to ``max_budget``,
``s_max = floor(log_eta(max_budget / min_budget))``, and one bracket at a time: the next starts when the last
round of the current one has ended. A new configuration is drawn from the prior with probability
``random_fraction`` or while no budget has ``min_points_in_model`` results (default: dimensions + 1); otherwise
from a Tree-structured Parzen Estimator fitted to the results of the largest budget that has enough of them — the
paper's rule. The estimator is Optuna's multivariate ``TPESampler`` (a maintained joint Parzen estimator, the
model class of BOHB's KDE): ``top_n_percent`` sets the share of good results, ``num_samples`` the candidates
scored by the density ratio.

Differences from NNI: NNI passes each final result's *sequence number* (0) as its budget to the model, so all
results land in one model; here each result counts at its ``TRIAL_BUDGET``, as in the paper. ``bandwidth_factor``
and ``min_bandwidth`` tune ConfigSpace/statsmodels' KDE, which Optuna's estimator replaces with its own bandwidth
rule: they are accepted and, when changed, a warning says they have no effect. No nested spaces (as in NNI); the
normal types work (NNI's ConfigSpace conversion of them is broken). ``seed`` is trialfleet's addition.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import warnings
from typing import TYPE_CHECKING, Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.search_space.flat import Internal, sample_all
from trialfleet.tuning.tuners.successive_halving import Bracket, BracketTuner
from trialfleet.tuning.utils import check_count, check_number

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)

KDE_ONLY_ARGS = {"bandwidth_factor": 3, "min_bandwidth": 1e-3}


class BohbTuner(BracketTuner):
    algorithm_name = "BOHB"
    nested_space = False

    def __init__(
        self,
        optimize_mode: str = "maximize",
        min_budget: float = 1,
        max_budget: float = 3,
        eta: int = 3,
        min_points_in_model: int | None = None,
        top_n_percent: int = 15,
        num_samples: int = 64,
        random_fraction: float = 1 / 3,
        bandwidth_factor: float = 3,
        min_bandwidth: float = 1e-3,
        seed: int | None = None,
    ) -> None:
        low = check_number(min_budget, "BOHB", "min_budget", positive=True)
        high = check_number(max_budget, "BOHB", "max_budget", positive=True)
        if high < low:
            raise AlgorithmError(
                f"BOHB: classArgs.max_budget ({max_budget}) must be >= min_budget ({min_budget})"
            )
        eta = check_count(eta, "BOHB", "eta", minimum=2)
        super().__init__(optimize_mode, eta, high, math.floor(math.log(high / low, eta) + 1e-6))
        if min_points_in_model is not None:
            check_count(min_points_in_model, "BOHB", "min_points_in_model")
        self._min_points = min_points_in_model
        if (
            not isinstance(top_n_percent, int)
            or isinstance(top_n_percent, bool)
            or not 1 <= top_n_percent <= 99
        ):
            raise AlgorithmError(
                f"BOHB: classArgs.top_n_percent must be an integer in [1, 99], got {top_n_percent!r}"
            )
        self._top_percent = top_n_percent
        self._num_samples = check_count(num_samples, "BOHB", "num_samples")
        self._random_fraction = check_number(random_fraction, "BOHB", "random_fraction", minimum=0)
        given = {"bandwidth_factor": bandwidth_factor, "min_bandwidth": min_bandwidth}
        for name, value in given.items():
            check_number(value, "BOHB", name, minimum=0)
        changed = sorted(name for name, value in given.items() if value != KDE_ONLY_ARGS[name])
        if changed:
            _logger.warning(
                "BOHB: classArgs %s have no effect: Optuna's estimator sets its own bandwidths", changed
            )
        self._init_stream(seed)
        self._studies: dict[int, optuna.Study] = {}

    def _may_start_bracket(self, current: Bracket | None) -> bool:
        return current is None or current.done

    def _sample(self, budget: int) -> Internal:
        study = self._model_study()
        if study is None or self._rng.random() < self._random_fraction:
            return sample_all(self._specs, self._rng)
        import optuna

        from trialfleet.tuning.tuners.optuna_base import suggest

        trial = study.ask()
        internal = suggest(trial, self._specs)
        study.tell(
            trial, state=optuna.trial.TrialState.FAIL
        )  # a draw, not an evaluation: the model ignores it
        return internal

    def _learn(self, internal: Internal, budget: int, reward: float) -> None:
        from trialfleet.tuning.tuners.optuna_base import finished_trial

        loss = -reward if self._maximize else reward
        if budget not in self._studies:
            self._studies[budget] = self._new_study()
        self._studies[budget].add_trial(finished_trial(internal, self._specs, loss))

    def _model_study(self) -> optuna.Study | None:
        """The study of the largest budget with enough results for a model, or None."""
        import optuna

        needed = self._min_points or len(self._specs) + 1
        for budget in sorted(self._studies, reverse=True):
            study = self._studies[budget]
            if len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))) >= needed:
                return study
        return None

    def _new_study(self) -> optuna.Study:
        import optuna
        from optuna.samplers import TPESampler

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        options: dict[str, Any] = {
            "n_startup_trials": 0,
            "n_ei_candidates": self._num_samples,
            "multivariate": True,
            "seed": self._rng.randrange(2**31),
            # deprecated in Optuna 4.9 (removal planned for 6.0): passed while the installed Optuna has it
            "gamma": functools.partial(_good_count, self._top_percent),
        }
        if "gamma" not in inspect.signature(TPESampler).parameters:
            _logger.warning("BOHB: this Optuna has no TPE gamma; top_n_percent is not applied")
            del options["gamma"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.simplefilter("ignore", FutureWarning)
            sampler = TPESampler(**options)
        return optuna.create_study(direction="minimize", sampler=sampler)


def _good_count(top_percent: int, n: int) -> int:
    return max(1, math.ceil(n * top_percent / 100))
