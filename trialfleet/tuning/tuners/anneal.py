"""``Anneal``: hyperopt's annealing search (``hyperopt/anneal.py``, NNI's ``Anneal``), on the flat space.

Each new parameter set starts from a good finished trial (the k-th best, k drawn from a geometric distribution
with mean 2) and samples every parameter around that trial's value in a window that shrinks as
``1 / (1 + 0.1 * n_observations)``: a narrower uniform window, a smaller normal sigma, or a lower chance to
switch to another option of a categorical. Until a parameter has observations it is drawn from its prior.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.base import RandomStreamTuner
from trialfleet.tuning.search_space.flat import (
    Internal,
    ParamSpec,
    flatten,
    from_parameters,
    sample_internal,
    to_parameters,
)
from trialfleet.tuning.utils import OptimizeMode, extract_scalar_reward, parse_optimize_mode

_logger = logging.getLogger(__name__)

AVG_BEST_IDX = 2.0
SHRINK_COEF = 0.1
LIARS = ("min", "max", "mean")


class AnnealTuner(RandomStreamTuner):
    algorithm_name = "Anneal"

    def __init__(
        self,
        optimize_mode: str = "minimize",
        parallel_optimize: bool = False,
        constant_liar_type: str = "min",
        seed: int | None = None,
    ) -> None:
        self._mode = parse_optimize_mode(optimize_mode, self.algorithm_name)
        if constant_liar_type not in LIARS:
            raise AlgorithmError(
                f"Anneal: classArgs.constant_liar_type must be one of {', '.join(LIARS)}, got {constant_liar_type!r}"
            )
        self._liar = constant_liar_type if parallel_optimize else None
        self._init_stream(seed)
        self._specs: list[ParamSpec] = []
        self._running: dict[int | None, Internal] = {}
        self._finished: list[tuple[Internal, float]] = []  # (internal parameters, loss), loss lower is better

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        history = sorted(self._finished + self._lies(), key=lambda item: item[1])
        base = self._pick(history) if history else None
        internal: Internal = {}
        for spec in self._specs:
            if spec.is_active(internal):
                internal[spec.key] = self._suggest(spec, history, base)
        self._running[parameter_id] = internal
        return to_parameters(internal, self._specs)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        loss = reward if self._mode is OptimizeMode.Minimize else -reward
        internal = self._running.pop(parameter_id, None)
        if internal is None:
            internal = self._internal_or_none(parameters)
        if internal is not None:
            self._finished.append((internal, loss))

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        self._running.pop(parameter_id, None)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        internal = self._internal_or_none(parameters)
        if internal is not None:
            self._running[parameter_id] = internal

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    def _internal_or_none(self, parameters: Any) -> Internal | None:
        try:
            return from_parameters(parameters, self._specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning("Anneal: ignoring parameters outside the search space: %r", parameters)
            return None

    def _lies(self) -> list[tuple[Internal, float]]:
        if self._liar is None or not self._finished or not self._running:
            return []
        losses = [loss for _, loss in self._finished]
        if self._liar == "min":
            lie = min(losses)
        elif self._liar == "max":
            lie = max(losses)
        else:
            lie = sum(losses) / len(losses)
        return [(internal, lie) for internal in self._running.values()]

    def _pick(self, history: list[tuple[Internal, float]]) -> Internal:
        """A good trial of ``history`` (sorted by loss): the k-th best, k geometric with mean AVG_BEST_IDX."""
        u = self._rng.random()
        k = int(math.log(1.0 - u) / math.log(1.0 - 1.0 / AVG_BEST_IDX))
        return history[min(k, len(history) - 1)][0]

    def _suggest(self, spec: ParamSpec, history: list[tuple[Internal, float]], base: Internal | None) -> Any:
        observed = [(params, loss) for params, loss in history if spec.key in params]
        if not observed:
            return sample_internal(spec, self._rng)
        if base is None or spec.key not in base:
            base = self._pick(observed)
        return _around(spec, base[spec.key], 1.0 / (1.0 + len(observed) * SHRINK_COEF), self._rng)


def _around(spec: ParamSpec, value: float | int, shrink: float, rng: random.Random) -> float | int:
    """A draw near ``value``: the prior mixed with, or squeezed around, the chosen trial's value."""
    if spec.categorical:
        return rng.randrange(spec.size) if rng.random() < shrink else value
    if spec.normal:
        return rng.gauss(float(value), float(spec.values[1]) * shrink)
    low, high = spec.bounds
    half = (high - low) * shrink / 2
    middle = min(max(float(value), low + half), high - half)
    return rng.uniform(middle - half, middle + half)
