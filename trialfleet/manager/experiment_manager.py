"""The experiment loop: collect updates → apply them → enforce limits → submit into free slots → wait.

One manager per experiment, one asyncio loop, made of named parts, each testable on its own with an injected
training service and clock: the :class:`~.driver.AlgorithmDriver` (tuner and assessor), the
:class:`~.reconciler.Reconciler` (poll → store, and resume) and the :class:`~.scheduler.Scheduler` (what runs
next). Everything the loop learns is written to the store before it acts on it, so a manager killed at any
point restarts from the store alone. This class holds the life cycle and the commands of the REST server,
the CLI and the Python API.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trialfleet.errors import ExperimentStateError, NoSpaceError, TrialfleetError
from trialfleet.manager import decisions
from trialfleet.manager.clock import Clock, SystemClock
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.platforms import Platform, Platforms, PlatformState
from trialfleet.manager.reconciler import Reconciler
from trialfleet.manager.scheduler import Scheduler
from trialfleet.status import ExperimentStatus, FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore, TrialRow, secrets
from trialfleet.storage.disk import is_no_space, release_space
from trialfleet.storage.patience import PatientWrites
from trialfleet.training_services.base import ExperimentContext, TrainingService

log = logging.getLogger("trialfleet.manager")

_LOOP_STATUSES = frozenset(
    {ExperimentStatus.RUNNING, ExperimentStatus.NO_MORE_TRIAL, ExperimentStatus.TUNER_NO_MORE_TRIAL}
)
FIRST_FAILURE_EVENT = "FIRST_FAILURE"
FAILURE_TAIL_LINES = 15
_ENDED = frozenset({ExperimentStatus.DONE, ExperimentStatus.STOPPED, ExperimentStatus.ERROR})
_STOP_GRACE_SECONDS = 20.0
_PERSIST_DURATION_EVERY = 1.0  # the CLI's progress and the web UI read it from the store

ServiceFactory = Callable[[ExperimentContext], TrainingService]


class ExperimentManager:
    """Runs (or views) one experiment whose directory and database already exist.

    ``service_factory`` builds the training service of each ``trainingService`` block (default: the platform
    registry's class for the block's ``platform``); ``clock`` is the manager's time; ``port`` the one its REST
    server listens on (a platform's relay listens on the next one, as NNI's REST channel did).
    """

    def __init__(
        self,
        experiment_dir: str | Path,
        *,
        clock: Clock | None = None,
        readonly: bool = False,
        service_factory: ServiceFactory | None = None,
        port: int | None = None,
    ) -> None:
        self.experiment_dir = Path(experiment_dir)
        self.clock: Clock = clock or SystemClock()
        self.readonly = readonly
        # its writes never wait for SQLite's lock on the event loop: self.write waits them out (patience.py)
        self.store = ExperimentStore.for_experiment_dir(self.experiment_dir, wait_for_lock=False)
        self.write = PatientWrites(self.store.path)
        row = self.store.experiment()
        self.experiment_id = row.id
        self.config = secrets.manager_config(self.store, self.experiment_dir)
        self.status = ExperimentStatus.VIEWED if readonly else row.status
        self.error: str | None = row.error
        self.exec_duration = row.exec_duration
        self.platforms: Platforms | None = None
        self.driver = AlgorithmDriver(on_failure=self.fail)
        self.reconciler = Reconciler(self.store, self.driver, self.clock, self.write)
        self.scheduler = Scheduler(self.store, self.driver, self.clock, self.write)
        self._service_factory = service_factory
        self.port = port
        self._kick = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._keep_status = False
        self._abort_reason: str | None = None
        #: the first failed trial's message and stderr tail, while none succeeded (overview, progress)
        self.first_failure: dict[str, str] | None = None
        self._last_tick = self.clock.monotonic()
        self._last_persist = self._last_tick
        self._persisted_duration = self.exec_duration

    # ---- life cycle --------------------------------------------------------------------------------

    async def start(self, *, resume: bool = False, on_tuner_built: Callable[[], None] | None = None) -> None:
        """Build tuner, assessor and training service; re-adopt or re-queue unfinished trials on resume.
        ``on_tuner_built`` is called once the tuner is, while the platforms may still be preparing."""
        if self.readonly:
            return
        from trialfleet.config.pipeline import unacted_warnings

        for warning in unacted_warnings(self.config):
            log.warning("config: %s", warning)
        # NNI's place for tuner checkpoints (PBT keeps the trials' model checkpoints there)
        os.environ["NNI_CHECKPOINT_DIRECTORY"] = str(self.experiment_dir / "checkpoint")
        self.platforms = self._build_platforms()
        # the platforms prepare (the local keeper spawner's interpreter starts, SSH connections open) while the
        # tuner is built in the driver's thread (for TPE, that imports Optuna: 0.35 s)
        starting = asyncio.ensure_future(self.platforms.start())
        try:
            await self.driver.start(self.config.tuner, self.config.assessor, self.config.search_space)
        except BaseException:
            await asyncio.wait([starting])  # the tuner's error is the one reported, not a platform's
            if not starting.cancelled():
                starting.exception()  # retrieved: a platform that failed too is not logged as never awaited
            try:  # no trial runs yet: what the start opened is closed
                await self.platforms.close(kill_trials=True)
            except Exception:
                log.exception("closing the platforms after the tuner failed to start")
            self.platforms = None
            raise
        if on_tuner_built is not None:
            on_tuner_built()
        await starting
        log.info("%s experiment: %s", "Resuming" if resume else "Starting", self.experiment_id)
        if resume:
            self.scheduler.pending = (await self.reconciler.resume(self.platforms)).pending
        else:
            waiting = self.store.trials(status=TrialStatus.WAITING)
            self.scheduler.pending = [t.id for t in waiting if t.handle is None]
        self.error = None  # a resumed experiment that had failed runs again
        self._set_status(ExperimentStatus.RUNNING, event="EXPERIMENT_RUNNING", end_time=None, error=None)

    @property
    def service(self) -> TrainingService | None:
        """The training service of the experiment's only platform (of its first, in a hybrid experiment)."""
        return self.platforms.members[0].service if self.platforms is not None else None

    def _build_platforms(self) -> Platforms:
        members = []
        for block in self.config.training_services:
            context = ExperimentContext(
                self.experiment_id, self.experiment_dir, self.config, block, self.port
            )
            if self._service_factory is not None:
                service = self._service_factory(context)
            else:
                from trialfleet.training_services.base import get_training_service_class

                service = get_training_service_class(block.platform)(context)
            members.append(Platform(block.platform, block, service))
        return Platforms(members, on_change=self._platform_changed)

    def _platform_changed(self, platform: Platform, state: PlatformState, message: str | None) -> None:
        """A hybrid experiment's platform failed, became unavailable or came back: logged and stored."""
        if state is PlatformState.UP:
            log.info("platform %s is available again", platform.name)
        elif state is PlatformState.UNAVAILABLE:
            log.warning(
                "platform %s is unavailable; its share goes to the others: %s", platform.name, message
            )
        else:
            log.error("platform %s left the experiment; the others go on: %s", platform.name, message)
        data = {"platform": platform.name, "message": message}
        self.write.soon(self.store.add_event, f"PLATFORM_{state.value}", self.clock.time(), data=data)

    async def run(self) -> ExperimentStatus:
        """The main loop; returns when ``request_stop`` is called (the experiment is then STOPPED)."""
        if self.platforms is None:  # viewing, or the start failed and the error is being shown
            await self._stop_requested.wait()
            return self.status
        failure: Exception | None = None
        try:
            while not self._stop_requested.is_set():
                await self.step()
                await self._wait()
        except Exception as exc:  # a full disk, a bug: the loop cannot go on, and says why
            failure = exc
        if failure is not None or self._abort_reason is not None:
            await self._end_in_error(failure)
        else:
            await self._shutdown()
        return self.status

    async def step(self) -> None:
        """One iteration of the loop; public so tests can drive it."""
        assert self.platforms is not None
        batch = await self.platforms.poll()
        if batch:
            await self._apply(await self.reconciler.apply(batch))
        self._tick_duration()
        if self.status in _LOOP_STATUSES:
            for trial_id in self.scheduler.overdue(self.config):
                if trial_id not in self.reconciler.cancel_requested:
                    log.info("trial %s passed maxTrialDuration; stopping it", trial_id)
                    await self._cancel(trial_id, TrialStatus.EARLY_STOPPED)
            if self.status is ExperimentStatus.RUNNING:
                await self.scheduler.request_trials(self.config, self.exec_duration)
            for refused in await self.scheduler.submit_pending(self.platforms):
                await self._trial_ended(refused)
        self._update_status()

    async def _apply(self, applied: Any) -> None:
        for trial_id in dict.fromkeys(applied.early_stop):
            await self._cancel(trial_id, TrialStatus.EARLY_STOPPED)
        for trial in applied.ended:
            await self._trial_ended(trial)

    async def _trial_ended(self, trial: TrialRow) -> None:
        if trial.failure_kind == FailureKind.EXPERIMENT_STOPPED.value and self.status in _LOOP_STATUSES:
            # an interrupted stop's cancel reached it after this manager resumed: re-run it, as resume would
            await self.write(
                self.store.retry_trial, trial.id, self.clock.time(), "re-run: the experiment's stop ended it"
            )
            self.scheduler.queue(trial.id)
            return
        if trial.status is TrialStatus.FAILED and self.first_failure is None:
            await self._explain_failure(trial)
        await self.driver.trial_ended(trial)
        if decisions.should_retry(
            trial.status, trial.failure_kind, trial.attempt, self.config.max_trial_retries
        ):
            await self.write(
                self.store.retry_trial, trial.id, self.clock.time(), f"retry after: {trial.message}"
            )
            self.scheduler.queue(trial.id)

    async def _explain_failure(self, trial: TrialRow) -> None:
        """While no trial has succeeded, the first failure's stderr is what the user needs (a missing module,
        the wrong python): logged, kept for the web UI's overview and the CLI's progress, in the store."""
        if self.store.trial_counts().get(TrialStatus.SUCCEEDED):
            return
        tail = ""
        if trial.handle is not None and self.platforms is not None:
            try:
                stderr = await self.platforms.read_trial_file(trial, "stderr")
                tail = "\n".join(stderr.decode("utf-8", "replace").splitlines()[-FAILURE_TAIL_LINES:])
            except (OSError, ValueError, TrialfleetError) as exc:
                tail = f"(its stderr cannot be read: {exc})"
        self.first_failure = {"trialId": trial.id, "message": trial.message or "", "stderrTail": tail}
        await self.write(
            self.store.add_event, FIRST_FAILURE_EVENT, self.clock.time(), trial.id, self.first_failure
        )
        log.warning(
            "trial %s failed (%s) before any succeeded; its stderr ends with:\n%s",
            trial.id,
            trial.message,
            tail,
        )

    async def _wait(self) -> None:
        assert self.platforms is not None
        waiter = asyncio.ensure_future(self.platforms.wait_for_wakeup(self.platforms.poll_interval))
        kick = asyncio.ensure_future(self._kick.wait())
        stop = asyncio.ensure_future(self._stop_requested.wait())
        try:
            await asyncio.wait({waiter, kick, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (waiter, kick, stop):
                fut.cancel()
        self._kick.clear()

    def abort(self, reason: str) -> None:
        """End the loop in ERROR with ``reason`` (a fatal signal), leaving the trials to a resume."""
        self._abort_reason = reason
        self._stop_requested.set()

    async def _end_in_error(self, failure: Exception | None) -> None:
        """The loop cannot go on: say why in the log (the reserved space given back first, so the line can be
        written), the store and the manifest; the trials are left running, as by a killed manager, so a resume
        re-adopts them and reads what they reported meanwhile."""
        release_space(self.experiment_dir)
        reason = self._abort_reason or why_stopped(failure, self.experiment_dir)
        log.error("the manager stops: %s", reason, exc_info=failure)
        try:
            self.fail(reason)
            await self.write.drain()
        finally:
            assert self.service is not None
            try:
                await self.service.close(kill_trials=False)
            except Exception:  # the trials stay for a resume whatever happens here
                log.exception("closing the training service")
            self.driver.close()

    def request_stop(self, *, keep_status: bool = False) -> None:
        """End the loop; the experiment is then STOPPED, unless ``keep_status`` (it finished: DONE or ERROR
        stays what it was)."""
        self._keep_status = keep_status
        self._stop_requested.set()

    def stop_requested(self) -> bool:
        """Whether the experiment is stopping (read from any thread: a stream being served checks it)."""
        return self._stop_requested.is_set()

    async def wait_until(self, statuses: set[ExperimentStatus], timeout: float | None = None) -> None:
        async def _poll() -> None:
            while self.status not in statuses:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(_poll(), timeout)

    async def _shutdown(self) -> None:
        keep = self._keep_status or self.status is ExperimentStatus.ERROR  # a stop does not hide a failure
        final = self.status if keep else ExperimentStatus.STOPPED
        self._set_status(ExperimentStatus.STOPPING)
        assert self.platforms is not None
        live = list(self.platforms.live)
        await self.write(
            self.store.request_cancel, live, TrialStatus.SYS_CANCELED
        )  # before any is sent: see Reconciler._ending
        for trial_id in live:
            await self.platforms.cancel(trial_id, TrialStatus.SYS_CANCELED)
        deadline = self.clock.monotonic() + _STOP_GRACE_SECONDS
        while self.platforms.live and self.clock.monotonic() < deadline:
            await self.platforms.wait_for_wakeup(0.1)
            await self._apply(await self.reconciler.apply(await self.platforms.poll(), stopping=True))
        await self.platforms.close(kill_trials=True)
        now = self.clock.time()
        for trial in self.store.trials(status=(TrialStatus.WAITING, TrialStatus.RUNNING)):
            status: TrialStatus = TrialStatus.SYS_CANCELED
            kind = FailureKind.EXPERIMENT_STOPPED  # re-run by resume
            if trial.cancel_status in (TrialStatus.USER_CANCELED, TrialStatus.EARLY_STOPPED):
                status, kind = trial.cancel_status, FailureKind.CANCELED  # as it was asked
            await self.write(
                self.store.end_trial,
                trial.id,
                status,
                now,
                message="experiment stopped",
                failure_kind=kind.value,
            )
        self._tick_duration(force_persist=True)
        end_time = self.store.experiment().end_time if final is ExperimentStatus.DONE else now
        self._set_status(final, event=f"EXPERIMENT_{final.value}", end_time=end_time or now)
        await self.write.drain()
        self.driver.close()

    # ---- status --------------------------------------------------------------------------------------

    def _update_status(self) -> None:
        if self.status not in _LOOP_STATUSES and self.status is not ExperimentStatus.DONE:
            return
        new = decisions.experiment_status_after(
            ExperimentStatus.RUNNING,
            budget_done=self.scheduler.budget_exhausted(self.config, self.exec_duration),
            tuner_done=self.driver.tuner_done,
            live_trials=self.scheduler.live_count(),
        )
        if new is not self.status:
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
        if self.exec_duration == self._persisted_duration:
            return  # stopped, done or only viewed: nothing to write (a commit makes every cached REST body stale)
        if force_persist or now - self._last_persist >= _PERSIST_DURATION_EVERY:
            self._last_persist = now
            self._persisted_duration = self.exec_duration
            self.write.soon(self.store.update_experiment, exec_duration=self.exec_duration)

    def _set_status(self, status: ExperimentStatus, *, event: str | None = None, **fields: Any) -> None:
        if status is not self.status:  # NNI's lines, which users' scripts grep in nnimanager.log
            log.info("Change NNIManager status from: %s to: %s", self.status.value, status.value)
            if status is ExperimentStatus.DONE:
                log.info("Experiment done.")
            elif status is ExperimentStatus.STOPPED:
                log.info("Experiment stopped.")
        self.status = status
        self.write.soon(
            self.store.update_experiment,
            now=self.clock.time(),
            event=event,
            status=status.value,
            exec_duration=self.exec_duration,
            **fields,
        )
        from trialfleet.storage import manifest

        ended = status in _ENDED and "end_time" in fields
        end_ms = int(fields["end_time"] * 1000) if ended and fields["end_time"] is not None else None
        manifest.upsert(self.experiment_id, status=status.value, endTime=end_ms if ended else None)

    def fail(self, message: str) -> None:
        log.error("experiment %s failed: %s", self.experiment_id, message)
        self.error = message
        self._set_status(
            ExperimentStatus.ERROR, event="EXPERIMENT_ERROR", error=message, end_time=self.clock.time()
        )

    # ---- commands (REST, CLI, Python API) -------------------------------------------------------------

    def _require_writable(self) -> None:
        if self.readonly:
            raise ExperimentStateError("the experiment is opened read-only (view); resume it to change it")

    async def cancel_trial(self, trial_id: str, status: TrialStatus = TrialStatus.USER_CANCELED) -> None:
        self._require_writable()
        trial = self.store.trial(trial_id)
        if trial.status.is_terminal:
            raise ExperimentStateError(f"trial {trial_id} has already ended ({trial.status.value})")
        await self._cancel(trial_id, status)

    async def _cancel(self, trial_id: str, status: TrialStatus) -> None:
        trial = self.store.trial(trial_id)
        if trial.status.is_terminal:
            return
        self.reconciler.cancel_requested.add(trial_id)
        self.driver.forget(trial_id)
        await self.write(
            self.store.add_event,
            "USER_TO_CANCEL" if status is TrialStatus.USER_CANCELED else "TO_EARLY_STOP",
            self.clock.time(),
            trial_id,
        )
        if trial.handle is None:
            self.scheduler.unqueue(trial_id)
            await self.write(
                self.store.end_trial,
                trial_id,
                status,
                self.clock.time(),
                message="canceled before it started",
                failure_kind=FailureKind.CANCELED.value,
            )
            await self._trial_ended(self.store.trial(trial_id))
        elif self.platforms is not None:
            await self.write(self.store.request_cancel, [trial_id], status)  # durable before it is sent
            await self.platforms.cancel(trial_id, status)
        self._kick.set()

    def customized_trial_problem(self, parameters: object) -> tuple[str, str] | None:
        """Why a customized trial with these parameters would be refused, as (what, why): ``parameters`` when
        they are not a set a tuner could give (:func:`decisions.customized_problem`), ``maxTrialNumber`` once
        that many trials were submitted (NNI refuses it too); None when it would be queued. The web UI's dialog
        asks it while the user types; :meth:`add_customized_trial` refuses by it."""
        problem = decisions.customized_problem(parameters, self.config.search_space)
        if problem is not None:
            return "parameters", problem
        limit = self.config.max_trial_number
        if limit is not None and self.scheduler.submitted_count() >= limit:
            return "maxTrialNumber", (
                f"the experiment has submitted its maxTrialNumber ({limit}) trials; raise maxTrialNumber "
                "(PUT /experiment?update_type=MAX_TRIAL_NUM) to add one"
            )
        return None

    async def add_customized_trial(
        self, parameters: dict[str, Any], *, raise_max_trial_number: bool = False
    ) -> int:
        """Queue a trial with these parameters, checked as a tuner's are, and against the search space (ConfigError);
        refused once maxTrialNumber trials were submitted, as NNI refuses it (ExperimentStateError), unless
        ``raise_max_trial_number``: then maxTrialNumber grows by this trial alone (stored once the trial is, so
        the tuner never gets the new slot first)."""
        self._require_writable()
        from trialfleet.errors import ConfigError

        refused = self.customized_trial_problem(parameters)
        if refused is not None and refused[0] == "parameters":
            raise ConfigError(refused[1], file="request body", key_path="parameters")
        if refused is not None and not raise_max_trial_number:
            raise ExperimentStateError(refused[1])
        record = decisions.parameter_record(None, parameters, source="customized")
        trial = await self.write(self.store.add_trial, decisions.new_trial_id, record, self.clock.time())
        if refused is not None:
            await self.update_config(max_trial_number=self.scheduler.submitted_count())
        self.scheduler.queue(trial.id)
        if self.status is ExperimentStatus.DONE:
            self._set_status(ExperimentStatus.RUNNING, end_time=None)
        self._kick.set()
        return trial.sequence_id

    async def update_config(self, **fields: Any) -> None:
        """Change trialConcurrency, maxTrialNumber, maxExperimentDuration or searchSpace while running; the
        values are validated by the config model (:meth:`ExperimentConfig.updated`): ConfigError otherwise."""
        self._require_writable()
        updated = self.config.updated(**fields)
        if "search_space" in fields:
            from trialfleet.errors import ConfigError, SearchSpaceError
            from trialfleet.tuning import validate_search_space

            try:
                validate_search_space(updated.search_space)
            except SearchSpaceError as exc:
                where = f"searchSpace.{exc.key_path}" if exc.key_path else "searchSpace"
                raise ConfigError(exc.message, file="update", key_path=where) from exc
        self.config = updated
        await self.write(
            self.store.update_experiment,
            now=self.clock.time(),
            event="CONFIG_UPDATED",
            config=secrets.stored_form(self.config)[0],
        )
        if "search_space" in fields and self.driver.tuner is not None:
            assert self.config.search_space is not None
            await self.driver.update_search_space(self.config.search_space)
        if self.status is ExperimentStatus.DONE or self.status is ExperimentStatus.NO_MORE_TRIAL:
            self._set_status(ExperimentStatus.RUNNING, end_time=None)
        self._kick.set()

    async def import_data(self, records: list[dict[str, Any]]) -> None:
        self._require_writable()
        await self.write(self.store.add_imported_data, records, self.clock.time())
        if self.driver.tuner is not None:
            await self.driver.import_data(records)


def why_stopped(exc: BaseException | None, experiment_dir: Path) -> str:
    """The experiment's error for an exception that ended its manager: a full disk names the file (or the
    experiment's directory when the write did not say which), an unexpected error its type."""
    if exc is None:
        return "the manager stopped"
    if is_no_space(exc):
        path = exc.path if isinstance(exc, NoSpaceError) else getattr(exc, "filename", None)
        return f"no space left on device ({path or experiment_dir})"
    if isinstance(exc, TrialfleetError):
        return str(exc)
    return f"the manager failed: {type(exc).__name__}: {exc}"
