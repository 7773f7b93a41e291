"""Successive-halving brackets, the engine of NNI's Hyperband and BOHB advisors, driven as a tuner.

NNI's advisors (``hyperband_advisor.py``, ``bohb_advisor.py``) talk to the manager directly; here the same
brackets are driven by the tuner calls. A bracket ``s`` (``s_max`` down to 0, then again) starts
``n = ceil((s_max + 1) * eta**s / (s + 1))`` configurations at budget ``r = max_budget / eta**s``; round ``i`` runs
``floor(n / eta**i)`` of them at budget ``floor(r * eta**i)``. The budget reaches the trial as
``parameters['TRIAL_BUDGET']`` (an integer, as in NNI). When every trial of a round has *ended*
(``trial_end``), the best of them by final result (``optimize_mode``) go to the next round; trials that ended
without a result are not promoted. While nothing can be proposed (the next round waits for running trials), the
tuner raises ``NoMoreTrialError`` as NNI's advisors answer ``NoMoreTrialJobs``: the manager asks again when a
trial ends.

Resume: a recorded proposal is matched to its slot by its parameters (promoted configurations) or by its
budget (first-round configurations, which take the recorded values), so the brackets continue where they were.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trialfleet.errors import SearchSpaceError
from trialfleet.tuning.base import NoMoreTrialError, RandomStreamTuner
from trialfleet.tuning.search_space.flat import Internal, ParamSpec, flatten, from_parameters, to_parameters
from trialfleet.tuning.utils import OptimizeMode, extract_scalar_reward, parse_optimize_mode

_logger = logging.getLogger(__name__)

BUDGET_KEY = "TRIAL_BUDGET"
_EPSILON = 1e-6  # NNI's, so that budgets and sizes come out exactly as in NNI


@dataclass(eq=False)
class Slot:
    bracket: Bracket
    round: int
    config: int
    budget: int


@dataclass(eq=False)
class Bracket:
    s: int
    s_max: int
    eta: int
    max_budget: float
    configs: dict[int, Internal] = field(default_factory=dict)
    rounds: list[list[int]] = field(default_factory=list)  # config ids per round
    results: list[dict[int, float]] = field(default_factory=list)  # per round: config -> result
    ended: list[int] = field(default_factory=list)  # per round: trials ended
    stopped: bool = False  # a round promoted nobody

    @property
    def n(self) -> int:
        return math.ceil((self.s_max + 1) * self.eta**self.s / (self.s + 1) - _EPSILON)

    def size(self, i: int) -> tuple[int, int]:
        """NNI's ``get_n_r``: how many configurations round ``i`` runs, and at which budget."""
        r = self.max_budget / self.eta**self.s
        return math.floor(self.n / self.eta**i + _EPSILON), math.floor(r * self.eta**i + _EPSILON)

    @property
    def all_issued(self) -> bool:
        return self.stopped or len(self.rounds) > self.s

    @property
    def done(self) -> bool:
        return self.all_issued and all(e >= len(r) for e, r in zip(self.ended, self.rounds, strict=True))

    def start_round(self, config_ids: list[int]) -> list[Slot]:
        i = len(self.rounds)
        self.rounds.append(config_ids)
        self.results.append({})
        self.ended.append(0)
        budget = self.size(i)[1]
        return [Slot(self, i, c, budget) for c in config_ids]

    def end_trial(self, slot: Slot, maximize: bool) -> list[Slot]:
        """Count the trial as ended; when its round is complete, start the next one (its slots)."""
        i = slot.round
        self.ended[i] += 1
        if self.ended[i] < len(self.rounds[i]) or i + 1 > self.s or len(self.rounds) > i + 1:
            return []
        ranked = sorted(self.results[i].items(), key=lambda item: item[1], reverse=maximize)
        promoted = [config for config, _ in ranked[: self.size(i + 1)[0]]]
        if not promoted:
            self.stopped = True
            return []
        return self.start_round(promoted)


class BracketTuner(RandomStreamTuner):
    """Hyperband's bookkeeping; subclasses choose new configurations and when a new bracket may start."""

    is_advisor: ClassVar[bool] = True

    def __init__(self, optimize_mode: str, eta: int, max_budget: float, s_max: int) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, self.algorithm_name) is OptimizeMode.Maximize
        self._eta = eta
        self._max_budget = max_budget
        self._s_max = s_max
        self._next_s = s_max
        self._specs: list[ParamSpec] = []
        self._queue: list[Slot] = []
        self._current: Bracket | None = None
        self._running: dict[int | None, Slot] = {}

    # ---- subclass hooks ----------------------------------------------------------------------------

    def _sample(self, budget: int) -> Internal:
        raise NotImplementedError

    def _may_start_bracket(self, current: Bracket | None) -> bool:
        raise NotImplementedError

    def _learn(self, internal: Internal, budget: int, reward: float) -> None:
        """A final result at a budget (BOHB's model learns from it)."""

    # ---- tuner calls ----------------------------------------------------------------------------------

    @classmethod
    def check_search_space(cls, space: Any) -> None:
        super().check_search_space(space)
        if BUDGET_KEY in space:
            raise SearchSpaceError(
                f"search space parameter '{BUDGET_KEY}': tuner {cls.algorithm_name} passes the budget under "
                "that name, rename the parameter",
                key_path=("searchSpace", BUDGET_KEY),
            )

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        if not self._queue and self._may_start_bracket(self._current):
            self._start_bracket()
        if not self._queue:
            raise NoMoreTrialError(
                f"{self.algorithm_name} waits for the running trials of its current round; asked again when a trial ends"
            )
        slot = self._queue.pop(0)
        self._running[parameter_id] = slot
        return self._parameters(slot)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        reward = float(extract_scalar_reward(value))
        slot = self._running.get(parameter_id) if parameter_id is not None else None
        if slot is not None:
            slot.bracket.results[slot.round].setdefault(slot.config, reward)
            self._learn(slot.bracket.configs[slot.config], slot.budget, reward)
            return
        internal, budget = self._split(parameters)
        if internal is not None:
            self._learn(internal, budget, reward)

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        slot = self._running.pop(parameter_id, None) if parameter_id is not None else None
        if slot is not None:
            self._queue += slot.bracket.end_trial(slot, self._maximize)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        internal, budget = self._split(parameters)
        if parameter_id is None or internal is None:
            return
        slot = self._take_promoted(internal, budget) or self._take_first_round(internal, budget)
        if slot is None:
            _logger.warning("%s: a recorded proposal fits no bracket: %r", self.algorithm_name, parameters)
            return
        self._running[parameter_id] = slot

    def import_data(self, data: list[dict[str, Any]]) -> None:
        for entry in data:
            self.receive_trial_result(None, entry["parameter"], entry["value"])

    # ---- internals ------------------------------------------------------------------------------------

    def _start_bracket(self) -> None:
        if self._next_s < 0:
            self._next_s = self._s_max
        bracket = Bracket(self._next_s, self._s_max, self._eta, self._max_budget)
        self._next_s -= 1
        self._current = bracket
        count, budget = bracket.size(0)
        for index in range(count):
            bracket.configs[index] = self._sample(budget)
        self._queue += bracket.start_round(list(range(count)))

    def _parameters(self, slot: Slot) -> dict[str, Any]:
        return {**to_parameters(slot.bracket.configs[slot.config], self._specs), BUDGET_KEY: slot.budget}

    def _split(self, parameters: Any) -> tuple[Internal | None, int]:
        if not isinstance(parameters, dict):
            return None, 0
        budget = parameters.get(BUDGET_KEY, self._max_budget)
        try:
            internal = from_parameters({k: v for k, v in parameters.items() if k != BUDGET_KEY}, self._specs)
        except (KeyError, ValueError, TypeError, IndexError):
            _logger.warning(
                "%s: ignoring parameters outside the search space: %r", self.algorithm_name, parameters
            )
            return None, 0
        return internal, int(budget)

    def _take_promoted(self, internal: Internal, budget: int) -> Slot | None:
        wanted = _canonical(to_parameters(internal, self._specs))
        for index, slot in enumerate(self._queue):
            config = to_parameters(slot.bracket.configs[slot.config], self._specs)
            if slot.round > 0 and slot.budget == budget and _canonical(config) == wanted:
                return self._queue.pop(index)
        return None

    def _take_first_round(self, internal: Internal, budget: int) -> Slot | None:
        for _ in range(self._s_max + 2):  # within one cycle of new brackets, one starts at that budget
            for index, slot in enumerate(self._queue):
                if slot.round == 0 and slot.budget == budget:
                    slot.bracket.configs[slot.config] = internal
                    return self._queue.pop(index)
            self._start_bracket()
        return None


def _canonical(parameters: Any) -> str:
    return json.dumps(parameters, sort_keys=True)
