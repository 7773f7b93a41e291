"""The experiment loop: collect updates → apply them → enforce limits → submit into free slots → wait.

One manager per experiment, one asyncio loop; the tuner and assessor run in this process (in a worker
thread so a slow model fit never stalls the REST server). Everything the loop learns is written to the
store before it acts on it, so a manager killed at any point restarts from the store alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from trialfleet.config import ExperimentConfig
from trialfleet.errors import ExperimentStateError, TrialfleetError
from trialfleet.manager import decisions
from trialfleet.manager.clock import Clock, SystemClock, wait_for_event
from trialfleet.status import ExperimentStatus, FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric, TrialRow
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.events import PollBatch, TrialMetric, TrialProblem
from trialfleet.training_services.registry import get_training_service_class
from trialfleet.training_services.spec import Deferred, TrialSpec

log = logging.getLogger("trialfleet.manager")
T = TypeVar("T")

_LOOP_STATUSES = frozenset(
    {ExperimentStatus.RUNNING, ExperimentStatus.NO_MORE_TRIAL, ExperimentStatus.TUNER_NO_MORE_TRIAL}
)
_STOP_GRACE_SECONDS = 20.0
_PERSIST_DURATION_EVERY = 10.0


class ExperimentManager:
    """Runs (or views) one experiment whose directory and database already exist."""

    def __init__(
        self, experiment_dir: str | Path, *, clock: Clock | None = None, readonly: bool = False
    ) -> None:
        self.experiment_dir = Path(experiment_dir)
        self.clock: Clock = clock or SystemClock()
        self.readonly = readonly
        self.store = ExperimentStore.for_experiment_dir(self.experiment_dir)
        row = self.store.experiment()
        self.experiment_id = row.id
        self.config = ExperimentConfig.from_json(row.config)
        self.status = ExperimentStatus.VIEWED if readonly else row.status
        self.error: str | None = row.error
        self.exec_duration = row.exec_duration
        self.service: TrainingService | None = None
        self.tuner: Any = None
        self.assessor: Any = None
        self._tuner_done = False
        self._pending: list[str] = []  # WAITING trials not yet placed, in submission order
        self._cancel_requested: set[str] = set()
        self._intermediate: dict[str, dict[int, object]] = {}
        self._unknown_to_tuner: set[str] = set()  # trials generated before a resume, for tuners that care
        self._kick = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._tuner_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tuner")
        self._last_tick = self.clock.monotonic()
        self._last_persist = self._last_tick

    # ---- life cycle --------------------------------------------------------------------------------

    async def start(self, *, resume: bool = False) -> None:
        """Build tuner, assessor and training service; re-adopt or re-queue unfinished trials on resume."""
        if self.readonly:
            return
        from trialfleet.config.pipeline import unacted_warnings
        from trialfleet.tuning import create_assessor, create_tuner

        for warning in unacted_warnings(self.config):
            log.warning("config: %s", warning)
        # NNI's place for tuner checkpoints (PBT keeps the trials' model checkpoints there)
        os.environ["NNI_CHECKPOINT_DIRECTORY"] = str(self.experiment_dir / "checkpoint")
        self.tuner = await self._in_tuner_thread(create_tuner, self.config.tuner, self.config.search_space)
        if self.config.assessor is not None:
            if getattr(self.tuner, "is_advisor", False):
                log.warning("the assessor is ignored: the tuner is an advisor and decides each trial's budget")
            else:
                self.assessor = create_assessor(self.config.assessor)
        self.service = self._build_service()
        await self.service.start()
        if resume:
            await self._reconcile()
        else:
            self._pending = [t.id for t in self.store.trials(status=TrialStatus.WAITING) if t.handle is None]
        self._set_status(ExperimentStatus.RUNNING, event="EXPERIMENT_RUNNING")

    def _build_service(self) -> TrainingService:
        service_config = self.config.training_service
        platform = "hybrid" if isinstance(service_config, list) else service_config.platform
        cls = get_training_service_class(platform)
        assert not isinstance(service_config, list)  # hybrid has no training service class yet
        context = ExperimentContext(self.experiment_id, self.experiment_dir, self.config, service_config)
        return cls(context)

    async def _reconcile(self) -> None:
        """Resume: every unfinished trial is re-adopted, re-queued or re-run (never silently dropped)."""
        from trialfleet.tuning import HistoryRecord

        history = []
        outcome: dict[str, int] = {"adopted": 0, "rerun": 0, "queued": 0, "finished": 0}
        for trial in self.store.trials():
            trial, what = await self._reconcile_trial(trial)
            outcome[what] += 1
            if not trial.status.is_terminal and not getattr(self.tuner, "restores_live_trials", False):
                self._unknown_to_tuner.add(trial.id)
            value = decisions.decode_metric(trial.final_data) if trial.final_data else None
            history.append(
                HistoryRecord(trial.parameter_id, trial.hyper_parameters, value, trial.status.value)
            )
        await self._in_tuner_thread(self.tuner.restore, history)
        if self.assessor is not None:
            await self._restore_assessor()
        self.store.add_event("EXPERIMENT_RESUMED", self.clock.time(), data=outcome)
        log.info(
            "resumed: %(adopted)d running trials re-adopted, %(rerun)d re-run, %(queued)d queued", outcome
        )

    async def _restore_assessor(self) -> None:
        """Give the assessor the curves of earlier trials; live trials keep being assessed from where they were."""
        from trialfleet.tuning.base import TrialCurve

        points: dict[str, dict[int, object]] = {}
        for metric in self.store.metrics(type="PERIODICAL"):
            points.setdefault(metric.trial_id, {})[metric.sequence] = decisions.decode_metric(metric.data)
        curves = []
        for trial in self.store.trials():
            mine = points.get(trial.id, {})
            curves.append(TrialCurve(trial.id, decisions.contiguous_prefix(mine), trial.status.value))
            if not trial.status.is_terminal and mine:
                self._intermediate[trial.id] = mine
        try:
            await self._in_tuner_thread(self.assessor.restore, curves)
        except Exception:
            log.exception("assessor.restore failed; it starts without the earlier trials' curves")

    async def _reconcile_trial(self, trial: TrialRow) -> tuple[TrialRow, str]:
        assert self.service is not None
        if trial.status is TrialStatus.SYS_CANCELED and trial.failure_kind == FailureKind.EXPERIMENT_STOPPED:
            trial = self.store.retry_trial(trial.id, self.clock.time(), "re-run after resume")
            self._pending.append(trial.id)
            return trial, "rerun"
        if trial.status.is_terminal:
            return trial, "finished"
        if trial.handle is not None:
            await self.service.adopt(trial.id, trial.handle, trial.cursor)
            self.store.add_event("ADOPTED", self.clock.time(), trial.id)
            return trial, "adopted"
        self._pending.append(trial.id)
        return trial, "queued"

    async def run(self) -> ExperimentStatus:
        """The main loop; returns when ``request_stop`` is called (the experiment is then STOPPED)."""
        if self.service is None:  # viewing, or the start failed and the error is being shown
            await self._stop_requested.wait()
            return self.status
        while not self._stop_requested.is_set():
            await self.step()
            await self._wait()
        await self._shutdown()
        return self.status

    async def step(self) -> None:
        """One iteration of the loop; public so tests can drive it."""
        assert self.service is not None
        batch = await self.service.poll()
        if batch:
            await self._apply(batch)
        self._tick_duration()
        if self.status in _LOOP_STATUSES:
            await self._enforce_limits()
            await self._request_trials()
            await self._submit_pending()
        self._update_status()

    async def _wait(self) -> None:
        assert self.service is not None
        waiter = asyncio.ensure_future(self.service.wakeup.wait())
        kick = asyncio.ensure_future(self._kick.wait())
        stop = asyncio.ensure_future(self._stop_requested.wait())
        try:
            await asyncio.wait(
                {waiter, kick, stop}, timeout=self.service.poll_interval, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for fut in (waiter, kick, stop):
                fut.cancel()
        self._kick.clear()

    def request_stop(self) -> None:
        self._stop_requested.set()

    async def wait_until(self, statuses: set[ExperimentStatus], timeout: float | None = None) -> None:
        async def _poll() -> None:
            while self.status not in statuses:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(_poll(), timeout)

    async def _shutdown(self) -> None:
        self._set_status(ExperimentStatus.STOPPING)
        assert self.service is not None
        for trial_id in list(self.service.live):
            await self.service.cancel(trial_id, TrialStatus.SYS_CANCELED)
        deadline = self.clock.monotonic() + _STOP_GRACE_SECONDS
        while self.service.live and self.clock.monotonic() < deadline:
            await wait_for_event(self.service.wakeup, 0.1)
            await self._apply(await self.service.poll())
        await self.service.close(kill_trials=True)
        now = self.clock.time()
        for trial in self.store.trials(status=(TrialStatus.WAITING, TrialStatus.RUNNING)):
            self.store.end_trial(
                trial.id,
                TrialStatus.SYS_CANCELED,
                now,
                message="experiment stopped",
                failure_kind=FailureKind.EXPERIMENT_STOPPED.value,
            )
        self._tick_duration(force_persist=True)
        self._set_status(ExperimentStatus.STOPPED, event="EXPERIMENT_STOPPED", end_time=now)
        self._tuner_thread.shutdown(wait=False)

    # ---- applying what the training service saw ------------------------------------------------------

    async def _apply(self, batch: PollBatch) -> None:
        for waiting in batch.waiting:
            self.store.set_waiting_reason(waiting.trial_id, waiting.reason)
        for started in batch.started:
            self.store.mark_running(started.trial_id, started.timestamp)
        if batch.metrics or batch.problems:
            self._store_metrics(batch)
        for problem in batch.problems:
            log.warning("trial %s: %s", problem.trial_id, problem.message)
            self.store.add_problem(problem.trial_id, problem.message, problem.timestamp)
        for metric in batch.metrics:
            await self._feed_algorithms(metric.trial_id, metric.type, metric.sequence, metric.data)
        for ended in batch.ended:
            status = ended.status
            failure_kind = ended.failure_kind.value if ended.failure_kind else None
            if ended.trial_id in self._cancel_requested and status is TrialStatus.FAILED:
                failure_kind = FailureKind.CANCELED.value
            if self.status is ExperimentStatus.STOPPING and status is TrialStatus.SYS_CANCELED:
                failure_kind = FailureKind.EXPERIMENT_STOPPED.value  # re-run by resume
            self._cancel_requested.discard(ended.trial_id)
            self._intermediate.pop(ended.trial_id, None)
            self.store.end_trial(
                ended.trial_id,
                status,
                ended.timestamp,
                exit_code=ended.exit_code,
                message=ended.message,
                failure_kind=failure_kind,
            )
            await self._trial_ended(self.store.trial(ended.trial_id))

    def _store_metrics(self, batch: PollBatch) -> None:
        rows = []
        for m in batch.metrics:
            final_value = None
            if m.type == "FINAL":
                final_value = decisions.scalar_of(decisions.decode_metric(m.data))
            rows.append(
                NewMetric(m.trial_id, m.parameter_id, m.type, m.sequence, m.data, m.timestamp, final_value)
            )
        cursors: dict[str, dict[str, Any]] = {}
        items: list[TrialMetric | TrialProblem] = [*batch.metrics, *batch.problems]
        for item in items:
            cursor = cursors.setdefault(item.trial_id, {})
            for channel, offset in (item.cursor or {}).items():
                # metrics and problems interleave in a stream: the cursor is the furthest point read
                cursor[channel] = max(offset, cursor.get(channel, offset))
        self.store.add_metrics(rows, {tid: c for tid, c in cursors.items() if c})

    async def _feed_algorithms(self, trial_id: str, type_: str, sequence: int, data: str) -> None:
        value = decisions.decode_metric(data)
        if type_ == "FINAL":
            trial = self.store.trial(trial_id)
            if trial.final_data != data or not self._tuner_wants(trial):
                return  # only the first FINAL metric counts, as in NNI
            await self._guard_tuner(
                self.tuner.receive_trial_result,
                trial.parameter_id,
                trial.hyper_parameters,
                value,
                customized=trial.parameter_source == "customized",
                trial_job_id=trial_id,
            )
        elif self.assessor is not None and trial_id not in self._cancel_requested:
            points = self._intermediate.setdefault(trial_id, {})
            points[sequence] = value
            history = decisions.contiguous_history(points)
            if history is not None and not await self._assess(trial_id, list(history)):
                await self.cancel_trial(trial_id, TrialStatus.EARLY_STOPPED)

    def _tuner_wants(self, trial: TrialRow) -> bool:
        """NNI hands customized trials' results only to tuners that opt in, and a tuner restored on resume
        only results of parameters it knows about."""
        if trial.id in self._unknown_to_tuner:
            return False
        if trial.parameter_source == "customized":
            return bool(getattr(self.tuner, "accepts_customized", lambda: False)())
        return True

    async def _assess(self, trial_id: str, history: list[object]) -> bool:
        try:
            result = await self._in_tuner_thread(self.assessor.assess_trial, trial_id, history)
        except Exception:
            log.exception("assessor failed on trial %s; the trial goes on", trial_id)
            return True
        return bool(getattr(result, "value", result))

    async def _trial_ended(self, trial: TrialRow) -> None:
        # NoMoreTrialError means "none now" (Hyperband, PBT wait for a round): ask again when a trial ends, as NNI
        self._tuner_done = False
        success = trial.status is TrialStatus.SUCCEEDED
        if self._tuner_wants(trial):
            await self._guard_tuner(self.tuner.trial_end, trial.parameter_id, success)
        if self.assessor is not None:
            try:
                await self._in_tuner_thread(self.assessor.trial_end, trial.id, success)
            except Exception:
                log.exception("assessor.trial_end failed on trial %s", trial.id)
        if decisions.should_retry(
            trial.status, trial.failure_kind, trial.attempt, self.config.max_trial_retries
        ):
            self.store.retry_trial(trial.id, self.clock.time(), f"retry after: {trial.message}")
            self._pending.append(trial.id)

    # ---- limits and submission ------------------------------------------------------------------------

    def _budget(self) -> decisions.Budget:
        return decisions.Budget(self.config.max_trial_number, self.config.max_experiment_duration)

    def _submitted_count(self) -> int:
        return self.store.experiment().next_sequence_id

    def _live_count(self) -> int:
        counts = self.store.trial_counts()
        return counts.get(TrialStatus.WAITING, 0) + counts.get(TrialStatus.RUNNING, 0)

    async def _enforce_limits(self) -> None:
        running = [(t.id, t.start_time) for t in self.store.trials(status=TrialStatus.RUNNING)]
        for trial_id in decisions.overdue_trials(running, self.clock.time(), self.config.max_trial_duration):
            if trial_id not in self._cancel_requested:
                log.info("trial %s passed maxTrialDuration; stopping it", trial_id)
                await self.cancel_trial(trial_id, TrialStatus.EARLY_STOPPED)

    async def _request_trials(self) -> None:
        if self._tuner_done or self.status is not ExperimentStatus.RUNNING:
            return
        submitted = self._submitted_count()
        if decisions.budget_exhausted(self._budget(), submitted, self.exec_duration):
            return
        wanted = decisions.new_trials_allowed(
            self.config.trial_concurrency, self._live_count(), self._budget(), submitted
        )
        for _ in range(wanted):
            if not await self._new_trial_from_tuner():
                return

    async def _new_trial_from_tuner(self) -> bool:
        from trialfleet.tuning import NoMoreTrialError

        (parameter_id,) = self.store.allocate_parameter_ids(1)
        try:
            params = await self._in_tuner_thread(self.tuner.generate_parameters, parameter_id)
        except NoMoreTrialError:
            log.info("the tuner has no more trials")
            self._tuner_done = True
            return False
        except Exception:
            self.fail(f"tuner failed in generate_parameters:\n{traceback.format_exc()}")
            return False
        record = decisions.parameter_record(parameter_id, params)
        trial = self.store.add_trial(decisions.new_trial_id(), record, self.clock.time())
        self._pending.append(trial.id)
        return True

    async def _submit_pending(self) -> None:
        assert self.service is not None
        while self._pending:
            trial = self.store.trial(self._pending[0])
            if trial.status is not TrialStatus.WAITING:
                self._pending.pop(0)
                continue
            try:
                result = await self.service.submit(self._spec(trial))
            except TrialfleetError as exc:
                self._pending.pop(0)
                self.store.end_trial(
                    trial.id,
                    TrialStatus.FAILED,
                    self.clock.time(),
                    message=str(exc),
                    failure_kind=FailureKind.INFRASTRUCTURE.value,
                )
                await self._trial_ended(self.store.trial(trial.id))
                continue
            if isinstance(result, Deferred):
                if trial.message != result.reason:
                    self.store.set_waiting_reason(trial.id, result.reason)
                return
            self._pending.pop(0)
            self.store.mark_submitted(
                trial.id, result.handle, result.location, self.clock.time(), running=result.started
            )

    def _spec(self, trial: TrialRow) -> TrialSpec:
        ts = self.config.training_service
        assert not isinstance(ts, list)
        return TrialSpec(
            trial_id=trial.id,
            sequence_id=trial.sequence_id,
            command=ts.trial_command,
            code_dir=Path(ts.trial_code_directory),
            parameter_record=trial.parameters,
            gpu_number=ts.trial_gpu_number,
            attempt=trial.attempt,
        )

    def _update_status(self) -> None:
        if self.status not in _LOOP_STATUSES and self.status is not ExperimentStatus.DONE:
            return
        budget_done = decisions.budget_exhausted(self._budget(), self._submitted_count(), self.exec_duration)
        new = decisions.experiment_status_after(
            ExperimentStatus.RUNNING,
            budget_done=budget_done,
            tuner_done=self._tuner_done,
            live_trials=self._live_count(),
        )
        if new is not self.status:
            log.info("experiment %s: %s", self.experiment_id, new.value)
            self._set_status(
                new,
                event=f"EXPERIMENT_{new.value}",
                end_time=self.clock.time() if new is ExperimentStatus.DONE else None,
            )

    def _tick_duration(self, force_persist: bool = False) -> None:
        now = self.clock.monotonic()
        if self.status in _LOOP_STATUSES:
            self.exec_duration += now - self._last_tick
        self._last_tick = now
        if force_persist or now - self._last_persist >= _PERSIST_DURATION_EVERY:
            self._last_persist = now
            self.store.update_experiment(exec_duration=self.exec_duration)

    def _set_status(self, status: ExperimentStatus, *, event: str | None = None, **fields: Any) -> None:
        self.status = status
        self.store.update_experiment(
            now=self.clock.time(),
            event=event,
            status=status.value,
            exec_duration=self.exec_duration,
            **fields,
        )
        from trialfleet.storage import manifest

        manifest.upsert(self.experiment_id, status=status.value)

    def fail(self, message: str) -> None:
        log.error("experiment %s failed: %s", self.experiment_id, message)
        self.error = message
        self._set_status(ExperimentStatus.ERROR, event="EXPERIMENT_ERROR", error=message)

    async def _in_tuner_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._tuner_thread, lambda: fn(*args, **kwargs))

    async def _guard_tuner(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """A crashing tuner puts the experiment in ERROR with its traceback; the manager lives on."""
        if self.status is ExperimentStatus.ERROR:
            return
        try:
            await self._in_tuner_thread(fn, *args, **kwargs)
        except Exception:
            self.fail(f"tuner failed in {getattr(fn, '__name__', fn)}:\n{traceback.format_exc()}")

    # ---- commands (REST, CLI, Python API) -------------------------------------------------------------

    def _require_writable(self) -> None:
        if self.readonly:
            raise ExperimentStateError("the experiment is opened read-only (view); resume it to change it")

    async def cancel_trial(self, trial_id: str, status: TrialStatus = TrialStatus.USER_CANCELED) -> None:
        self._require_writable()
        trial = self.store.trial(trial_id)
        if trial.status.is_terminal:
            return
        self._cancel_requested.add(trial_id)
        self.store.add_event(
            "USER_TO_CANCEL" if status is TrialStatus.USER_CANCELED else "TO_EARLY_STOP",
            self.clock.time(),
            trial_id,
        )
        if trial.handle is None:
            if trial_id in self._pending:
                self._pending.remove(trial_id)
            self.store.end_trial(
                trial_id,
                status,
                self.clock.time(),
                message="canceled before it started",
                failure_kind=FailureKind.CANCELED.value,
            )
            await self._trial_ended(self.store.trial(trial_id))
        elif self.service is not None:
            await self.service.cancel(trial_id, status)
        self._kick.set()

    async def add_customized_trial(self, parameters: dict[str, Any]) -> int:
        self._require_writable()
        record = decisions.parameter_record(None, parameters, source="customized")
        trial = self.store.add_trial(decisions.new_trial_id(), record, self.clock.time())
        self._pending.append(trial.id)
        if self.status is ExperimentStatus.DONE:
            self._set_status(ExperimentStatus.RUNNING, end_time=None)
        self._kick.set()
        return trial.sequence_id

    async def update_config(self, **fields: Any) -> None:
        """Change trialConcurrency, maxTrialNumber, maxExperimentDuration or searchSpace while running."""
        self._require_writable()
        allowed = {"trial_concurrency", "max_trial_number", "max_experiment_duration", "search_space"}
        unknown = set(fields) - allowed
        if unknown:
            raise ExperimentStateError(f"cannot update {', '.join(sorted(unknown))} of a running experiment")
        self.config = self.config.model_copy(update=fields)
        self.store.update_experiment(
            now=self.clock.time(), event="CONFIG_UPDATED", config=self.config.to_json(include_secrets=True)
        )
        if "search_space" in fields and self.tuner is not None:
            await self._guard_tuner(self.tuner.update_search_space, fields["search_space"])
            self._tuner_done = False
        if self.status is ExperimentStatus.DONE or self.status is ExperimentStatus.NO_MORE_TRIAL:
            self._set_status(ExperimentStatus.RUNNING, end_time=None)
        self._kick.set()

    async def import_data(self, records: list[dict[str, Any]]) -> None:
        self._require_writable()
        self.store.add_imported_data(records, self.clock.time())
        if self.tuner is not None:
            await self._guard_tuner(self.tuner.import_data, records)
