"""``Hyperband``: NNI's ``hyperband_advisor`` (random configurations in successive-halving brackets).

classArgs as in NNI: ``optimize_mode`` (maximize), ``R`` (60, the largest budget), ``eta`` (3) and ``exec_mode``:
``parallelism`` (NNI's default) starts the next bracket whenever nothing else can be proposed, ``serial`` only
once the current bracket has handed out its last round (NNI's rule: it does not wait for that round's results).
Brackets cycle from ``s_max = floor(log_eta(R))`` down to 0 and again, until maxTrialNumber or
maxExperimentDuration ends the experiment. ``seed`` is trialfleet's addition. See :mod:`successive_halving`.
"""

from __future__ import annotations

import math

from trialfleet.errors import AlgorithmError
from trialfleet.tuning.search_space.flat import Internal, sample_all
from trialfleet.tuning.tuners.successive_halving import Bracket, BracketTuner
from trialfleet.tuning.utils import check_count

EXEC_MODES = ("parallelism", "serial")


class HyperbandTuner(BracketTuner):
    algorithm_name = "Hyperband"

    def __init__(
        self,
        optimize_mode: str = "maximize",
        R: int = 60,
        eta: int = 3,
        exec_mode: str = "parallelism",
        seed: int | None = None,
    ) -> None:
        R = check_count(R, "Hyperband", "R")
        eta = check_count(eta, "Hyperband", "eta", minimum=2)
        if exec_mode not in EXEC_MODES:
            raise AlgorithmError(
                f"Hyperband: classArgs.exec_mode must be parallelism or serial, got {exec_mode!r}"
            )
        super().__init__(optimize_mode, eta, R, math.floor(math.log(R, eta) + 1e-6))
        self._serial = exec_mode == "serial"
        self._init_stream(seed)

    def _sample(self, budget: int) -> Internal:
        return sample_all(self._specs, self._rng)

    def _may_start_bracket(self, current: Bracket | None) -> bool:
        return not self._serial or current is None or current.all_issued
