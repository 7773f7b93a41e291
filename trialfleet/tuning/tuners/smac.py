"""``SMAC``: NNI's ``smac_tuner`` on SMAC3 2.x (the ``tuners`` and ``nni`` extras), through SMAC's ask/tell interface.

SMAC's hyper-parameter optimisation facade (random forest surrogate and local search) proposes; results are told back as costs (negated when ``optimize_mode`` is maximize). ``config_dedup``
(NNI's, default false): when SMAC proposes a configuration already proposed, ask again, and after 20 repeats
draw a random configuration instead. Space types as NNI's SMAC: choice, randint, uniform, quniform, loguniform;
no nesting. A ``quniform`` is searched as a continuous range and rounded to q for the trial.

Differences from NNI: NNI wrapped SMAC3 0.x; this is SMAC3 2.x's facade, with its intensifier and random
interleaving. As in NNI the model takes over after one initial configuration (the space's default): 2.x's own
initial design of 10 random points per dimension, sized for an unknown number of trials here, would leave a
6-dimensional search of 60 trials entirely random. Results of trials SMAC did not propose (restore, imported
data) are told as new trials. SMAC writes its run history to a temporary directory that lives as long as the
tuner. ``seed`` is trialfleet's addition (default: random).
"""

from __future__ import annotations

import logging
import math
import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.base import BuiltinTuner, NoMoreTrialError
from trialfleet.tuning.search_space.flat import Internal, ParamSpec, flatten, from_parameters, to_parameters
from trialfleet.tuning.utils import (
    OptimizeMode,
    check_seed,
    derive_seed,
    extract_scalar_reward,
    parse_optimize_mode,
)

if TYPE_CHECKING:
    from ConfigSpace import Configuration, ConfigurationSpace
    from smac import HyperparameterOptimizationFacade
    from smac.runhistory.dataclasses import TrialInfo

_logger = logging.getLogger(__name__)
_DEDUP_ATTEMPTS = 20


class SmacTuner(BuiltinTuner):
    algorithm_name = "SMAC"
    space_types = frozenset({"choice", "randint", "uniform", "quniform", "loguniform"})
    nested_space = False

    def __init__(
        self, optimize_mode: str = "maximize", config_dedup: bool = False, seed: int | None = None
    ) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, "SMAC") is OptimizeMode.Maximize
        if not isinstance(config_dedup, bool):
            raise AlgorithmError(f"SMAC: classArgs.config_dedup must be true or false, got {config_dedup!r}")
        self._dedup = config_dedup
        given_seed = check_seed(seed, "SMAC")
        self._seed = given_seed if given_seed is not None else random.randrange(2**31)
        self._specs: list[ParamSpec] = []
        self._space: ConfigurationSpace | None = None
        self._smac: HyperparameterOptimizationFacade | None = None
        self._output = tempfile.TemporaryDirectory(prefix="trialfleet-smac-")
        self._asked: dict[int, TrialInfo] = {}
        self._seen: set[str] = set()

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)
        self._space = _config_space(self._specs, self._seed)
        self._smac = self._facade(self._space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        from smac.main.exceptions import ConfigurationSpaceExhaustedException

        try:
            info = self._ask()
        except ConfigurationSpaceExhaustedException as exc:
            raise NoMoreTrialError("SMAC has tried every configuration of the search space") from exc
        self._seen.add(_key(info.config))
        self._asked[parameter_id] = info
        return to_parameters(_internal(info.config, self._specs), self._specs)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        from smac.runhistory.dataclasses import TrialValue

        reward = float(extract_scalar_reward(value))
        info = self._asked.pop(parameter_id, None) if parameter_id is not None else None
        if info is None:
            info = self._trial_for(parameters)
            if info is None:
                return
        self._require_smac().tell(info, TrialValue(cost=-reward if self._maximize else reward))

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        if parameter_id is not None:  # ended without a result: SMAC is told nothing
            self._asked.pop(parameter_id, None)

    def reseed(self, restored: int) -> None:
        seed = derive_seed(self._seed, restored)
        assert seed is not None and self._space is not None
        self._seed = seed
        self._smac = self._facade(self._space, resumed=True)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        info = self._trial_for(parameters)
        if parameter_id is not None and info is not None:
            self._seen.add(_key(info.config))
            self._asked[parameter_id] = info

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    def _ask(self) -> TrialInfo:
        smac = self._require_smac()
        info = smac.ask()
        for _ in range(_DEDUP_ATTEMPTS if self._dedup else 0):
            if _key(info.config) not in self._seen:
                return info
            info = smac.ask()
        return self._random_trial() if self._dedup and _key(info.config) in self._seen else info

    def _require_smac(self) -> HyperparameterOptimizationFacade:
        if self._smac is None:
            raise RuntimeError("SMAC: update_search_space must be called first")
        return self._smac

    def _facade(self, space: ConfigurationSpace, resumed: bool = False) -> HyperparameterOptimizationFacade:
        """SMAC starting from the space's default configuration, or (``resumed``) from the restored results
        alone: its initial design would otherwise propose the default again."""
        from smac import HyperparameterOptimizationFacade, Scenario
        from smac.initial_design import DefaultInitialDesign, RandomInitialDesign

        scenario = Scenario(
            space,
            deterministic=True,
            n_trials=2**31 - 1,
            seed=self._seed,
            output_directory=Path(self._output.name),
        )
        return HyperparameterOptimizationFacade(
            scenario,
            _never_called,
            initial_design=RandomInitialDesign(scenario, n_configs=0)
            if resumed
            else DefaultInitialDesign(scenario),
            overwrite=True,
            logging_level=logging.ERROR,
        )

    def _trial_for(self, parameters: Any) -> TrialInfo | None:
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo

        try:
            internal = from_parameters(parameters, self._specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning("SMAC: ignoring parameters outside the search space: %r", parameters)
            return None
        values = {_name(spec): _to_config_value(spec, internal[spec.key]) for spec in self._specs}
        assert self._space is not None
        return TrialInfo(config=Configuration(self._space, values=values), seed=self._seed)

    def _random_trial(self) -> TrialInfo:
        from smac.runhistory.dataclasses import TrialInfo

        assert self._space is not None
        return TrialInfo(config=self._space.sample_configuration(), seed=self._seed)


def _config_space(specs: list[ParamSpec], seed: int) -> ConfigurationSpace:
    from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer

    space = ConfigurationSpace(seed=seed)
    for spec in specs:
        name = _name(spec)
        if spec.type == "choice" or (spec.type == "randint" and spec.size == 1):
            space.add(Categorical(name, list(range(spec.size))))
        elif spec.type == "randint":
            space.add(Integer(name, (0, spec.size - 1)))
        else:
            low, high = float(spec.values[0]), float(spec.values[1])
            space.add(Float(name, (low, high), log=spec.log))
    return space


def _name(spec: ParamSpec) -> str:
    return str(spec.key[0])


def _to_config_value(spec: ParamSpec, internal: float | int) -> float | int:
    if spec.categorical:
        return int(internal)
    value = math.exp(internal) if spec.log else float(internal)
    return min(max(value, float(spec.values[0])), float(spec.values[1]))


def _internal(config: Configuration, specs: list[ParamSpec]) -> Internal:
    values = dict(config)
    return {
        spec.key: int(values[_name(spec)])
        if spec.categorical
        else _from_config_value(spec, values[_name(spec)])
        for spec in specs
    }


def _from_config_value(spec: ParamSpec, value: Any) -> float:
    return math.log(float(value)) if spec.log else float(value)


def _key(config: Configuration) -> str:
    return repr(sorted(dict(config).items()))


def _never_called(config: Any, seed: int = 0) -> float:
    raise RuntimeError("SMAC runs no target function here: trials report their results")
