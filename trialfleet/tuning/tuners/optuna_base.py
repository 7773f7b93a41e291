"""``TPE`` and ``Evolution`` on Optuna samplers, driven through Optuna's ask/tell interface (and helpers BOHB shares).

Optuna is imported only when one of these tuners meets its search space, so ``import trialfleet.tuning`` and
config validation stay fast. Each flat parameter (see :mod:`trialfleet.tuning.search_space.flat`) becomes one Optuna
parameter, asked for only when it is active, so nested choices are Optuna's conditional parameters:

============== ======================================= =================================================
NNI type       Optuna distribution                     value given to the trial
============== ======================================= =================================================
choice         Categorical(option indexes)             the option (``{"_name": ...}`` for nested ones)
randint        Int(0, upper - lower - 1)               lower + index
uniform        Float(low, high)                        as drawn
quniform       Int(round(low/q), round(high/q))         clip(k * q, low, high): the q grid as Optuna steps
loguniform     Float(low, high, log=True)              as drawn
qloguniform    Float(low, high, log=True)              clip(round(x / q) * q, low, high)
normal family  Float(eps, 1 - eps) on the normal CDF   mu + sigma * Phi^-1(u), then exp and/or q rounding
============== ======================================= =================================================

The normal types are unbounded, so the sampler works on their CDF: a uniform draw there is exactly the
normal prior, and ``eps`` cuts the tails at about 4.75 sigma.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

from trialfleet.tuning.base import BuiltinTuner
from trialfleet.tuning.search_space.flat import Internal, ParamSpec, flatten, from_parameters, to_parameters
from trialfleet.tuning.utils import (
    OptimizeMode,
    check_seed,
    derive_seed,
    extract_scalar_reward,
    parse_optimize_mode,
)

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)
_EPS = 1e-6
_STANDARD_NORMAL = NormalDist()


class OptunaTuner(BuiltinTuner):
    """Ask/tell bookkeeping shared by the Optuna-backed tuners; subclasses build the sampler."""

    def __init__(self, optimize_mode: str, seed: int | None) -> None:
        mode = parse_optimize_mode(optimize_mode, self.algorithm_name)
        self._direction: Literal["minimize", "maximize"] = (
            "maximize" if mode is OptimizeMode.Maximize else "minimize"
        )
        self._seed = check_seed(seed, self.algorithm_name)
        self._specs: list[ParamSpec] = []
        self._study: optuna.Study | None = None
        self._asked: dict[int, optuna.trial.Trial] = {}

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)
        if self._study is None:
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                sampler = self._make_sampler()
            self._study = optuna.create_study(direction=self._direction, sampler=sampler)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        trial = self._ask()
        self._asked[parameter_id] = trial
        return to_parameters(self._suggest(trial), self._specs)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        trial = self._asked.pop(parameter_id, None) if parameter_id is not None else None
        if trial is not None:
            self._require_study().tell(trial, reward)
        else:
            self._add_finished(parameters, reward)

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        trial = self._asked.pop(parameter_id, None) if parameter_id is not None else None
        if trial is not None:  # ended without a final result: nothing for the sampler to learn
            import optuna

            self._require_study().tell(trial, state=optuna.trial.TrialState.FAIL)

    def reseed(self, restored: int) -> None:
        import optuna

        self._seed = derive_seed(self._seed, restored)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self._require_study().sampler = self._make_sampler()

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        internal = self._internal_or_none(parameters)
        if parameter_id is None or internal is None:
            return
        self._require_study().enqueue_trial(self._optuna_params(internal), skip_if_exists=False)
        trial = self._ask()
        self._suggest(trial)  # the enqueued values come back as the trial's parameters
        self._asked[parameter_id] = trial

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self._add_finished(entry["parameter"], float(extract_scalar_reward(entry["value"])))

    def _require_study(self) -> optuna.Study:
        if self._study is None:
            raise RuntimeError(f"{self.algorithm_name}: update_search_space must be called first")
        return self._study

    def _ask(self) -> optuna.trial.Trial:
        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return self._require_study().ask()

    def _suggest(self, trial: optuna.trial.Trial) -> Internal:
        return suggest(trial, self._specs)

    def _add_finished(self, parameters: Any, reward: float) -> None:
        internal = self._internal_or_none(parameters)
        if internal is not None:
            self._require_study().add_trial(finished_trial(internal, self._specs, reward))

    def _optuna_params(self, internal: Internal) -> dict[str, Any]:
        return {
            optuna_name(spec): to_optuna(spec, internal[spec.key])
            for spec in self._specs
            if spec.key in internal
        }

    def _internal_or_none(self, parameters: Any) -> Internal | None:
        try:
            return from_parameters(parameters, self._specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning(
                "%s: ignoring parameters outside the search space: %r", self.algorithm_name, parameters
            )
            return None


def suggest(trial: optuna.trial.Trial, specs: list[ParamSpec]) -> Internal:
    """Ask ``trial`` for every active parameter; the answers as internal values."""
    import optuna.distributions as od

    internal: Internal = {}
    for spec in specs:
        if not spec.is_active(internal):
            continue
        name, dist = optuna_name(spec), optuna_distribution(spec)
        raw: Any  # a choice index, an int step or a float, depending on the distribution
        if isinstance(dist, od.CategoricalDistribution):
            raw = trial.suggest_categorical(name, dist.choices)
        elif isinstance(dist, od.IntDistribution):
            raw = trial.suggest_int(name, dist.low, dist.high)
        else:
            assert isinstance(dist, od.FloatDistribution)
            raw = trial.suggest_float(name, dist.low, dist.high, log=dist.log)
        internal[spec.key] = _to_internal(spec, raw)
    return internal


def finished_trial(internal: Internal, specs: list[ParamSpec], value: float) -> optuna.trial.FrozenTrial:
    """A completed Optuna trial for internal values, ready for ``study.add_trial``."""
    import optuna

    active = [spec for spec in specs if spec.key in internal]
    return optuna.trial.create_trial(
        params={optuna_name(spec): to_optuna(spec, internal[spec.key]) for spec in active},
        distributions={optuna_name(spec): optuna_distribution(spec) for spec in active},
        value=value,
    )


def optuna_name(spec: ParamSpec) -> str:
    # JSON keeps paths of nested parameters distinct whatever characters the user's names contain
    return json.dumps(list(spec.key))


def _q_range(spec: ParamSpec) -> tuple[int, int]:
    q = spec.q
    assert q is not None
    return round(float(spec.values[0]) / q), round(float(spec.values[1]) / q)


def optuna_distribution(spec: ParamSpec) -> optuna.distributions.BaseDistribution:
    import optuna.distributions as od

    if spec.type == "choice":
        return od.CategoricalDistribution(list(range(spec.size)))
    if spec.type == "randint":
        return od.IntDistribution(0, spec.size - 1)
    if spec.normal:
        return od.FloatDistribution(_EPS, 1 - _EPS)
    if spec.type == "quniform":
        return od.IntDistribution(*_q_range(spec))
    return od.FloatDistribution(float(spec.values[0]), float(spec.values[1]), log=spec.log)


def _to_internal(spec: ParamSpec, raw: float) -> float | int:
    if spec.categorical:
        return int(raw)
    if spec.normal:
        return float(spec.values[0]) + float(spec.values[1]) * _STANDARD_NORMAL.inv_cdf(raw)
    if spec.type == "quniform":
        q = spec.q
        assert q is not None
        return int(raw) * q
    return math.log(raw) if spec.log else float(raw)


def to_optuna(spec: ParamSpec, internal: float | int) -> float | int:
    if spec.categorical:
        return int(internal)
    if spec.normal:
        u = _STANDARD_NORMAL.cdf((internal - float(spec.values[0])) / float(spec.values[1]))
        return min(max(u, _EPS), 1 - _EPS)
    if spec.type == "quniform":
        q = spec.q
        assert q is not None
        low, high = _q_range(spec)
        return min(max(round(internal / q), low), high)
    value = math.exp(internal) if spec.log else float(internal)
    return min(max(value, float(spec.values[0])), float(spec.values[1]))
