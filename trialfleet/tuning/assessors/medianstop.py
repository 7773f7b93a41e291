"""``Medianstop``: the median stopping rule (NNI's ``medianstop_assessor``, from Google Vizier).

A running trial is stopped at step S when its best result so far is strictly worse than the median, over the
trials that completed successfully with at least S results, of their running averages at step S. Nothing is
stopped before ``start_step`` results or before any trial has completed. The manager only calls
``assess_trial`` with a history contiguous from the first intermediate result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trialfleet.errors import AlgorithmError
from trialfleet.status import TrialStatus
from trialfleet.tuning.base import Assessor, AssessResult, TrialCurve
from trialfleet.tuning.utils import OptimizeMode, extract_scalar_history, parse_optimize_mode


class MedianstopAssessor(Assessor):
    def __init__(self, optimize_mode: str = "maximize", start_step: int = 0) -> None:
        self._high_better = parse_optimize_mode(optimize_mode, "Medianstop") is OptimizeMode.Maximize
        if not isinstance(start_step, int) or isinstance(start_step, bool) or not 0 <= start_step <= 9999:
            raise AlgorithmError(
                f"Medianstop: classArgs.start_step must be an integer in [0, 9999], got {start_step!r}"
            )
        self._start_step = start_step
        self._running: dict[str, list[float]] = {}
        self._completed_averages: dict[str, list[float]] = {}

    def assess_trial(self, trial_job_id: str, trial_history: list[Any]) -> AssessResult:
        step = len(trial_history)
        if step < self._start_step:
            return AssessResult.Good
        history = extract_scalar_history(trial_history)
        self._running[trial_job_id] = history
        best = max(history) if self._high_better else min(history)
        at_step = sorted(avg[step - 1] for avg in self._completed_averages.values() if len(avg) >= step)
        if not at_step:
            return AssessResult.Good
        if self._high_better:
            # NNI takes the lower median when maximizing and the upper one when minimizing: the lenient side
            return AssessResult.Bad if best < at_step[(len(at_step) - 1) // 2] else AssessResult.Good
        return AssessResult.Bad if best > at_step[len(at_step) // 2] else AssessResult.Good

    def trial_end(self, trial_job_id: str, success: bool) -> None:
        history = self._running.pop(trial_job_id, None)
        if history is not None and success:
            self._completed_averages[trial_job_id] = _running_averages(history)

    def restore(self, history: Sequence[TrialCurve]) -> None:
        """What the live calls would have left: a trial counts once it was assessed (start_step results)."""
        for curve in history:
            if len(curve.intermediate) < max(self._start_step, 1):
                continue
            values = extract_scalar_history(curve.intermediate)
            if curve.is_live:
                self._running[curve.trial_job_id] = values
            elif curve.status == TrialStatus.SUCCEEDED.value:
                self._completed_averages[curve.trial_job_id] = _running_averages(values)


def _running_averages(history: list[float]) -> list[float]:
    total = 0.0
    averages = []
    for count, value in enumerate(history, start=1):
        total += value
        averages.append(total / count)
    return averages
