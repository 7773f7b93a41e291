"""``RegularizedEvolutionTuner``: ageing evolution (Real et al., "Regularized Evolution for Image Classifier
Architecture Search"), NNI's ``regularized_evolution_tuner`` applied to ordinary search spaces.

``population_size`` random individuals are proposed first. After that each proposal is a mutation of the best
of ``sample_size`` individuals drawn (with replacement) from the population: one active parameter is drawn again
from its prior (with the children of a nested choice drawn anew when the choice changes). Every result joins
the population, and the oldest individual leaves once it holds more than ``population_size`` — the "ageing".
A failed trial from the initial population is replaced by a new random one, as in NNI.

Differences from NNI, whose version is a NAS tuner that only accepts ``layer_choice``/``input_choice`` spaces:
this one takes every HPO type, nested choices included; while the initial population is handed out and no
result has arrived yet it proposes more random individuals where NNI raises NoMoreTrialError and waits.
``seed`` is trialfleet's addition.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.base import RandomStreamTuner
from trialfleet.tuning.search_space.flat import (
    Internal,
    ParamSpec,
    flatten,
    from_parameters,
    sample_all,
    sample_internal,
    to_parameters,
)
from trialfleet.tuning.utils import (
    OptimizeMode,
    check_count,
    extract_scalar_reward,
    parse_optimize_mode,
)

_logger = logging.getLogger(__name__)


class RegularizedEvolutionTuner(RandomStreamTuner):
    algorithm_name = "RegularizedEvolutionTuner"

    def __init__(
        self,
        optimize_mode: str = "maximize",
        population_size: int = 100,
        sample_size: int = 25,
        seed: int | None = None,
    ) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, self.algorithm_name) is OptimizeMode.Maximize
        self._population_size = check_count(population_size, self.algorithm_name, "population_size")
        self._sample_size = check_count(sample_size, self.algorithm_name, "sample_size")
        if self._sample_size > self._population_size:
            raise AlgorithmError(
                f"{self.algorithm_name}: classArgs.sample_size ({sample_size}) must not exceed "
                f"population_size ({population_size})"
            )
        self._init_stream(seed)
        self._specs: list[ParamSpec] = []
        self._initial_left = self._population_size
        self._population: deque[tuple[Internal, float]] = deque()  # oldest first; score higher is better
        self._running: dict[
            int | None, tuple[Internal, bool]
        ] = {}  # -> (individual, from the initial population)

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        initial = self._initial_left > 0 or not self._population
        if initial:
            self._initial_left = max(0, self._initial_left - 1)
            individual = sample_all(self._specs, self._rng)
        else:
            sample = [self._rng.choice(self._population) for _ in range(self._sample_size)]
            individual = self._mutate(max(sample, key=lambda member: member[1])[0])
        self._running[parameter_id] = (individual, initial)
        return to_parameters(individual, self._specs)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        entry = self._running.get(parameter_id)
        individual = entry[0] if entry is not None else self._internal_or_none(parameters)
        if individual is None:
            return
        self._population.append((individual, reward if self._maximize else -reward))
        if len(self._population) > self._population_size:
            self._population.popleft()

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        entry = self._running.pop(parameter_id, None)
        if entry is not None and not success and entry[1]:
            self._initial_left += 1

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        individual = self._internal_or_none(parameters)
        if individual is None:
            return
        initial = self._initial_left > 0
        self._initial_left = max(0, self._initial_left - 1)
        self._running[parameter_id] = (individual, initial)

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    def _mutate(self, parent: Internal) -> Internal:
        keys = [spec.key for spec in self._specs if spec.key in parent]
        if not keys:
            return {}
        target = self._rng.choice(keys)
        child: Internal = {}
        for spec in self._specs:
            if not spec.is_active(child):
                continue
            keep = spec.key != target and spec.key in parent
            child[spec.key] = parent[spec.key] if keep else sample_internal(spec, self._rng)
        return child

    def _internal_or_none(self, parameters: Any) -> Internal | None:
        try:
            return from_parameters(parameters, self._specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning(
                "%s: ignoring parameters outside the search space: %r", self.algorithm_name, parameters
            )
            return None
