"""``PBT``: population-based training (Jaderberg et al.), NNI's ``pbt_tuner``.

A population of ``population_size`` members runs in synchronous steps: every trial is one step of one member.
Its parameters carry two extra keys, as in NNI: ``load_checkpoint_dir`` (where the member's model is, or the
better member's it inherits) and ``save_checkpoint_dir`` (where this step must save it), both
``<all_checkpoint_dir>/<member>/<step>``; in step 0 both name the same, not yet existing directory. When every
member has a result for the step, the worst ``fraction`` copy a random one of the best ``fraction`` (its
checkpoint and its hyper-parameters), and those hyper-parameters are perturbed: with ``resample_probability``
drawn again from the prior, otherwise moved one step up or down (a range by ``factor`` of its width, a q type by
q, a choice or randint to the next option). A trial that fails, or ends without a result, scores worst. While a
step waits for its last trials, the tuner raises NoMoreTrialError (NNI's "no more parameters now"); the manager
asks again when a trial ends.

``all_checkpoint_dir`` defaults to ``$NNI_CHECKPOINT_DIRECTORY`` (set for the tuner by the manager, as NNI
sets it for its dispatcher), else ``~/nni/checkpoint``. Not supported: nested spaces (as in NNI). ``seed`` is
trialfleet's addition.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.errors import AlgorithmError, SearchSpaceError
from trialfleet.tuning.base import NoMoreTrialError, RandomStreamTuner
from trialfleet.tuning.search_space.flat import (
    Internal,
    ParamSpec,
    flatten,
    from_parameters,
    sample_all,
    to_parameters,
)
from trialfleet.tuning.tuners.pbt_perturb import perturb
from trialfleet.tuning.utils import (
    OptimizeMode,
    check_count,
    check_number,
    extract_scalar_reward,
    parse_optimize_mode,
)

_logger = logging.getLogger(__name__)

LOAD_KEY = "load_checkpoint_dir"
SAVE_KEY = "save_checkpoint_dir"


@dataclass(eq=False)
class Member:
    directory: str
    internal: Internal
    load: str
    save: str
    score: float | None = None


class PbtTuner(RandomStreamTuner):
    algorithm_name = "PBT"
    nested_space = False

    def __init__(
        self,
        optimize_mode: str = "maximize",
        all_checkpoint_dir: str | None = None,
        population_size: int = 10,
        factor: float = 0.2,
        resample_probability: float = 0.25,
        fraction: float = 0.2,
        seed: int | None = None,
    ) -> None:
        self._maximize = parse_optimize_mode(optimize_mode, "PBT") is OptimizeMode.Maximize
        default_dir = os.getenv("NNI_CHECKPOINT_DIRECTORY") or str(Path.home() / "nni" / "checkpoint")
        self._root = str(all_checkpoint_dir) if all_checkpoint_dir is not None else default_dir
        self._size = check_count(population_size, "PBT", "population_size")
        self._factor = check_number(factor, "PBT", "factor", minimum=0)
        self._resample = _probability(resample_probability, "resample_probability")
        self._fraction = _probability(fraction, "fraction")
        self._init_stream(seed)
        self._specs: list[ParamSpec] = []
        self._step = 0
        self._pending: list[Member] = []
        self._running: dict[int | None, Member] = {}
        self._finished: list[Member] = []

    @classmethod
    def check_search_space(cls, space: Any) -> None:
        super().check_search_space(space)
        for key in (LOAD_KEY, SAVE_KEY):
            if key in space:
                raise SearchSpaceError(
                    f"search space parameter '{key}': tuner PBT passes checkpoint directories under that name",
                    key_path=("searchSpace", key),
                )

    def update_search_space(self, search_space: Any) -> None:
        self.check_search_space(search_space)
        self._specs = flatten(search_space)
        if not self._pending and not self._running and not self._finished:
            self._pending = [self._new_member(index) for index in range(self._size)]

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict[str, Any]:
        if not self._pending:
            raise NoMoreTrialError(f"PBT waits for step {self._step} of its population to finish")
        member = self._pending.pop(0)
        self._running[parameter_id] = member
        return self._parameters(member)

    def receive_trial_result(
        self, parameter_id: int | None, parameters: Any, value: Any, **kwargs: Any
    ) -> None:
        member = self._running.pop(parameter_id, None) if parameter_id is not None else None
        if member is not None:
            self._finish(member, float(extract_scalar_reward(value)))

    def trial_end(self, parameter_id: int | None, success: bool, **kwargs: Any) -> None:
        member = self._running.pop(parameter_id, None) if parameter_id is not None else None
        if member is not None:  # ended without a result
            self._finish(member, -math.inf if self._maximize else math.inf)

    def register_proposal(self, parameter_id: int | None, parameters: Any) -> None:
        if parameter_id is None or not isinstance(parameters, dict) or SAVE_KEY not in parameters:
            return
        directory = os.path.dirname(str(parameters[SAVE_KEY]))
        member = next((m for m in self._pending if m.directory == directory), None)
        try:
            internal = from_parameters(
                {k: v for k, v in parameters.items() if k not in (LOAD_KEY, SAVE_KEY)}, self._specs
            )
        except (KeyError, ValueError, TypeError, IndexError):
            internal = None
        if member is None or internal is None:
            _logger.warning("PBT: a recorded proposal fits no member of step %d: %r", self._step, parameters)
            return
        self._pending.remove(member)
        member.internal, member.load = internal, str(parameters.get(LOAD_KEY, member.load))
        self._running[parameter_id] = member

    def _new_member(self, index: int) -> Member:
        directory = os.path.join(self._root, str(index))
        first = os.path.join(directory, "0")
        return Member(directory, sample_all(self._specs, self._rng), first, first)

    def _parameters(self, member: Member) -> dict[str, Any]:
        return {**to_parameters(member.internal, self._specs), LOAD_KEY: member.load, SAVE_KEY: member.save}

    def _finish(self, member: Member, score: float) -> None:
        member.score = score
        self._finished.append(member)
        if len(self._finished) == self._size:
            self._next_step()

    def _next_step(self) -> None:
        self._step += 1
        ranked = sorted(self._finished, key=_score, reverse=self._maximize)
        cutoff = math.ceil(self._fraction * len(ranked))
        tops, bottoms = ranked[:cutoff], ranked[len(ranked) - cutoff :]
        # every bottom member copies a top one as it was at the end of the step
        inherited = {}
        for bottom in bottoms:
            top = self._rng.choice(tops)
            new = perturb(top.internal, self._specs, self._factor, self._resample, self._rng)
            inherited[id(bottom)] = (new, top.save)
        for member in ranked:
            member.internal, member.load = inherited.get(id(member), (member.internal, member.save))
            member.save = os.path.join(member.directory, str(self._step))
            member.score = None
        self._pending = list(reversed(ranked))  # NNI pops its sorted list from the end
        self._finished = []


def _score(member: Member) -> float:
    assert member.score is not None
    return member.score


def _probability(value: object, name: str) -> float:
    number = check_number(value, "PBT", name, minimum=0)
    if number > 1:
        raise AlgorithmError(f"PBT: classArgs.{name} must be in [0, 1], got {value!r}")
    return number
