"""The algorithm driver: the tuner and the assessor (NNI's dispatcher), with NNI's quirks kept.

Both run in this process, in one worker thread, one call at a time, so a slow model fit never stalls the
manager's loop or its REST server. A tuner that raises anything but ``NoMoreTrialError`` is a tuner bug: the
driver reports it once through ``on_failure`` (the experiment goes to ERROR with the traceback) and calls the
tuner no more; a failing assessor only logs, and the trial goes on.

The quirks, as NNI has them: only a trial's first FINAL metric reaches the tuner; customized trials' results
reach only tuners that opt in (``accepts_customized``); after a resume, results of trials the restored tuner
does not know are withheld (unless it ``restores_live_trials``); ``NoMoreTrialError`` means "none now" and the
tuner is asked again when a trial ends; an assessor given beside an advisor is ignored with a warning.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.manager import decisions
from trialfleet.status import TrialStatus
from trialfleet.storage import MetricRow, TrialRow

if TYPE_CHECKING:
    from trialfleet.config.algorithm import AlgorithmConfig
    from trialfleet.tuning.base import Assessor, Tuner

log = logging.getLogger("trialfleet.manager.driver")
T = TypeVar("T")


@dataclass(frozen=True)
class Proposal:
    """What the tuner proposed: any JSON value (a dict usually; NNI's BatchTuner may hand out ``None``)."""

    parameters: Any


class AlgorithmDriver:
    """Owns the tuner and the assessor of one experiment (see the module docstring)."""

    def __init__(self, on_failure: Callable[[str], None]) -> None:
        self.tuner: Tuner | None = None
        self.assessor: Assessor | None = None
        self.tuner_done = False  # the tuner said NoMoreTrialError: ask again only after a trial ends
        self.failed = False
        self._on_failure = on_failure
        self._unknown_to_tuner: set[str] = set()  # trials from before a resume, for tuners that restore none
        self._points: dict[str, dict[int, object]] = {}  # intermediate results of live trials, by sequence
        self._results_given: set[str] = set()  # trials whose final result the tuner has had
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tuner")

    async def start(
        self, tuner: AlgorithmConfig, assessor: AlgorithmConfig | None, search_space: Any
    ) -> None:
        from trialfleet.tuning import create_assessor, create_tuner

        self.tuner = await self._call(create_tuner, tuner, search_space)
        if assessor is None:
            return
        if getattr(self.tuner, "is_advisor", False):
            log.warning("the assessor is ignored: the tuner is an advisor and decides each trial's budget")
        else:
            self.assessor = create_assessor(assessor)

    # ---- resume --------------------------------------------------------------------------------------

    async def restore(self, trials: list[TrialRow], periodical: Iterable[MetricRow]) -> None:
        """Give the tuner the earlier proposals and results, and the assessor the earlier curves."""
        from trialfleet.tuning import HistoryRecord

        tuner = self._tuner()
        history = []
        for trial in trials:
            if not trial.status.is_terminal and not getattr(tuner, "restores_live_trials", False):
                self._unknown_to_tuner.add(trial.id)
            value = decisions.decode_metric(trial.final_data) if trial.final_data else None
            history.append(
                HistoryRecord(trial.parameter_id, trial.hyper_parameters, value, trial.status.value)
            )
        await self._call(tuner.restore, history)
        if self.assessor is not None:
            await self._restore_assessor(trials, periodical)

    async def _restore_assessor(self, trials: list[TrialRow], periodical: Iterable[MetricRow]) -> None:
        """Earlier trials' curves; live trials keep being assessed from where they were."""
        from trialfleet.tuning.base import TrialCurve

        assert self.assessor is not None
        points: dict[str, dict[int, object]] = {}
        for metric in periodical:
            points.setdefault(metric.trial_id, {})[metric.sequence] = decisions.decode_metric(metric.data)
        curves = []
        for trial in trials:
            mine = points.get(trial.id, {})
            curves.append(TrialCurve(trial.id, decisions.contiguous_prefix(mine), trial.status.value))
            if not trial.status.is_terminal and mine:
                self._points[trial.id] = mine
        try:
            await self._call(self.assessor.restore, curves)
        except Exception:
            log.exception("assessor.restore failed; it starts without the earlier trials' curves")

    # ---- proposals and results -----------------------------------------------------------------------

    async def propose(self, parameter_id: int) -> Proposal | None:
        """Parameters for a new trial, or None when the tuner has none now (or failed)."""
        from trialfleet.tuning import NoMoreTrialError

        if self.failed:
            return None
        try:
            params = await self._call(self._tuner().generate_parameters, parameter_id)
        except NoMoreTrialError:
            log.info("the tuner has no more trials")
            self.tuner_done = True
            return None
        except Exception:
            self._fail(f"tuner failed in generate_parameters:\n{traceback.format_exc()}")
            return None
        problem = decisions.parameters_problem(params)
        if problem is not None:  # a customized trial's are refused alike (ExperimentManager.add_customized_trial)
            self._fail(f"tuner proposed parameters that cannot be stored: {problem}")
            return None
        return Proposal(params)

    async def final_result(self, trial: TrialRow, value: object) -> None:
        """The trial's first FINAL metric (``value``, decoded), for the tuner, once."""
        if trial.id in self._results_given or not self._tuner_wants(trial):
            return
        self._results_given.add(trial.id)
        await self._guard(
            self._tuner().receive_trial_result,
            trial.parameter_id,
            trial.hyper_parameters,
            value,
            customized=trial.parameter_source == "customized",
            trial_job_id=trial.id,
        )

    async def keep_running(self, trial_id: str, sequence: int, value: object) -> bool:
        """One intermediate result (``value``, decoded) for the assessor; False when it says the trial should stop
        early."""
        if self.assessor is None:
            return True
        points = self._points.setdefault(trial_id, {})
        points[sequence] = value
        history = decisions.contiguous_history(points)
        if history is None:
            return True
        try:
            result = await self._call(self.assessor.assess_trial, trial_id, list(history))
        except Exception:
            log.exception("assessor failed on trial %s; the trial goes on", trial_id)
            return True
        return bool(getattr(result, "value", result))

    async def trial_ended(self, trial: TrialRow) -> None:
        # NoMoreTrialError meant "none now" (Hyperband, PBT wait for a round): ask again, as NNI does
        self.tuner_done = False
        self._points.pop(trial.id, None)
        success = trial.status is TrialStatus.SUCCEEDED
        if self._tuner_wants(trial):
            await self._guard(self._tuner().trial_end, trial.parameter_id, success)
        if self.assessor is not None:
            try:
                await self._call(self.assessor.trial_end, trial.id, success)
            except Exception:
                log.exception("assessor.trial_end failed on trial %s", trial.id)

    def forget(self, trial_id: str) -> None:
        """A trial being cancelled: its intermediate results are no longer assessed."""
        self._points.pop(trial_id, None)

    async def update_search_space(self, search_space: dict[str, Any]) -> None:
        await self._guard(self._tuner().update_search_space, search_space)
        self.tuner_done = False

    async def import_data(self, records: list[dict[str, Any]]) -> None:
        await self._guard(self._tuner().import_data, records)

    def close(self) -> None:
        self._thread.shutdown(wait=False)

    # ---- plumbing ------------------------------------------------------------------------------------

    def _tuner_wants(self, trial: TrialRow) -> bool:
        """NNI hands customized trials' results only to tuners that opt in, and a tuner restored on resume
        only results of parameters it knows about."""
        if trial.id in self._unknown_to_tuner:
            return False
        if trial.parameter_source == "customized":
            return bool(getattr(self.tuner, "accepts_customized", lambda: False)())
        return True

    def _tuner(self) -> Tuner:
        if self.tuner is None:
            raise RuntimeError("the tuner is not created yet")
        return self.tuner

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: fn(*args, **kwargs))

    async def _guard(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """A crashing tuner puts the experiment in ERROR with its traceback; the manager lives on."""
        if self.failed:
            return
        try:
            await self._call(fn, *args, **kwargs)
        except Exception:
            self._fail(f"tuner failed in {getattr(fn, '__name__', fn)}:\n{traceback.format_exc()}")

    def _fail(self, message: str) -> None:
        self.failed = True
        self._on_failure(message)
