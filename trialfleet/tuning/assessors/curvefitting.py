"""``Curvefitting``: NNI's ``curvefitting_assessor`` (learning-curve extrapolation, Domhan et al. 2015), simpler.

A running trial is judged once it has ``start_step`` intermediate results, then every ``gap`` results, and only
after some trial has completed: its curve is extrapolated to step ``epoch_num`` and the trial is stopped when the
prediction is not above ``threshold`` x the best final performance of the completed trials (higher is better, as
in NNI, which has no ``optimize_mode`` here).

The extrapolation keeps NNI's model: the same 12 curve families (``vap``, ``pow3``, ``linear``, ``logx_linear``,
``dr_hill_zero_background``, ``log_power``, ``pow4``, ``mmf``, ``exp4``, ``ilog2``, ``weibull``, ``janoschek``)
fitted by least squares (scipy's ``curve_fit`` from NNI's starting values), NNI's bar for a usable fit (squared
error below n * mean**2), and no prediction ("wait for more information") when fewer than 4 families pass. It
is simpler in the combination: the prediction is the median of the usable families' predictions. NNI further
drops families whose prediction is far from the median of their last-step predictions and averages the rest
with weights that start equal and take 20 Metropolis steps of size 0.0005 (so stay within about 1% of equal);
the median plays that filter's part, unmoved by one wild extrapolation.

A fix: the best performance is each completed trial's own last result (NNI takes the last result of whichever
trial was assessed last).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.status import TrialStatus
from trialfleet.tuning.assessors.curve_models import CURVES
from trialfleet.tuning.base import Assessor, AssessResult, TrialCurve
from trialfleet.tuning.utils import check_count, check_number, extract_scalar_history

_logger = logging.getLogger(__name__)
LEAST_FITTED_FUNCTIONS = 4


class CurvefittingAssessor(Assessor):
    def __init__(
        self, epoch_num: int = 20, start_step: int = 6, threshold: float = 0.95, gap: int = 1
    ) -> None:
        self._target = check_count(epoch_num, "Curvefitting", "epoch_num")
        self._start_step = check_count(start_step, "Curvefitting", "start_step", minimum=0)
        if self._start_step == 0:
            _logger.warning("Curvefitting: a positive start_step is recommended")
        self._threshold = check_number(threshold, "Curvefitting", "threshold", minimum=0)
        self._gap = check_count(gap, "Curvefitting", "gap")
        if self._start_step > self._target:
            raise AlgorithmError(
                f"Curvefitting: start_step ({start_step}) must not exceed epoch_num ({epoch_num})"
            )
        self._last_judged: dict[str, int] = {}
        self._last_value: dict[str, float] = {}
        self._best: float | None = None

    def assess_trial(self, trial_job_id: str, trial_history: list[Any]) -> AssessResult:
        history = extract_scalar_history(trial_history)
        if history:
            self._last_value[trial_job_id] = history[-1]
        step = len(history)
        if self._best is None or step < self._start_step:
            return AssessResult.Good
        last = self._last_judged.get(trial_job_id)
        if last is not None and step - last < self._gap:
            return AssessResult.Good
        self._last_judged[trial_job_id] = step
        predicted = predict(history, self._target)
        if predicted is None:
            return AssessResult.Good
        return AssessResult.Good if predicted > self._best * self._threshold else AssessResult.Bad

    def trial_end(self, trial_job_id: str, success: bool) -> None:
        last = self._last_value.pop(trial_job_id, None)
        self._last_judged.pop(trial_job_id, None)
        if success and last is not None:
            self._best = last if self._best is None else max(self._best, last)

    def restore(self, history: Sequence[TrialCurve]) -> None:
        for curve in history:
            values = extract_scalar_history(curve.intermediate)
            if not values:
                continue
            if curve.is_live:
                self._last_value[curve.trial_job_id] = values[-1]
            elif curve.status == TrialStatus.SUCCEEDED.value:
                self._best = values[-1] if self._best is None else max(self._best, values[-1])


def predict(history: list[float], target: int) -> float | None:
    """The curve's value at step ``target`` (steps count from 1), or None when too few families fit."""
    import numpy as np

    observed = np.array(history, dtype=float)
    steps = np.arange(1, len(history) + 1, dtype=float)
    standard = float(np.mean(observed)) ** 2 * len(history)  # NNI's bar for a usable fit
    predictions = []
    for curve, start in CURVES:
        model = _fit(curve, start, history)
        if model is None:
            continue
        error = float(np.sum((model(steps) - observed) ** 2))
        at_target = float(model(np.array([float(target)]))[0])
        if math.isfinite(error) and error < standard and math.isfinite(at_target):
            predictions.append(at_target)
    if len(predictions) < LEAST_FITTED_FUNCTIONS:
        return None
    return float(np.median(predictions))


def _fit(
    curve: Callable[..., Any], start: Sequence[float], history: list[float]
) -> Callable[[Any], Any] | None:
    import numpy as np
    from scipy.optimize import curve_fit

    steps = np.arange(1, len(history) + 1, dtype=float)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            params, _ = curve_fit(curve, steps, np.array(history, dtype=float), p0=list(start), maxfev=2000)
    except (RuntimeError, ValueError, FloatingPointError, OverflowError, ZeroDivisionError):
        return None
    except TypeError:  # more parameters than points (start_step below 4): NNI skips that family too
        return None
    if not all(math.isfinite(p) for p in params):
        return None

    def model(x: Any) -> Any:
        with np.errstate(all="ignore"):
            return curve(x, *params)

    return model
