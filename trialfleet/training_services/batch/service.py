"""The base of the batch-job platforms: the collect loop, adoption and the end of a trial, once.

Each poll: one :class:`~.watcher.JobWatcher` refresh (the platform's jobs, batched and backed off), one look at
every trial directory (:mod:`..trial_files`), then per trial: started (the keeper's record, or the job running),
why it still waits (reported once per change), its new metrics, and its end as the platform's
:class:`~.outcome.OutcomeTable` decides it. A platform names its watcher, its table and the handle's key of its
job, launches and cancels its jobs, and adds what its jobs need beside (a cancel sent again, a log kept).
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.base import C, LiveTrial, TrainingService
from trialfleet.training_services.batch.outcome import RESULT_GRACE, BatchJob, JobView, OutcomeTable
from trialfleet.training_services.batch.reuse import WorkerFleet, WorkerOutcomes, runs_in_worker
from trialfleet.training_services.batch.watcher import JobWatcher
from trialfleet.training_services.events import PollBatch, TrialEnded, TrialStarted
from trialfleet.training_services.trial_dir import KEEPER_RECORD
from trialfleet.training_services.trial_files import TrialFiles, TrialLook

log = logging.getLogger(__name__)

J = TypeVar("J", bound=BatchJob)


class OptionalKeys(TypedDict, total=False):
    # a trial run by a reuse-mode worker (:mod:`.reuse`): the worker's name and directory
    worker: str
    worker_dir: str
    # where this machine sees the trial directory, when the job sees it elsewhere (read by nni_view)
    trial_dir_here: str


class BatchHandle(OptionalKeys):
    """What every batch-job handle holds; a platform's adds its job's key (``job_key``) and its own."""

    trial_dir: str  # as the platform's TrialFiles reach it


BH = TypeVar("BH", bound=BatchHandle)


class BatchJobService(TrainingService[C, BH], Generic[C, J, BH]):
    """A platform whose trial attempts are jobs of a cluster's scheduler (see the module docstring).

    Generic over its config model, its job record and its handle: ``BatchJobService[SlurmConfig, SlurmJob,
    SlurmHandle]``."""

    #: the key of the handle that names the trial's job
    job_key: ClassVar[str] = "job_id"
    #: a trial given up while its job may still run (a node lost, a pause) has its job ended
    ends_abandoned_jobs: ClassVar[bool] = False

    _unreadable: str | None = None  # why the last look at the trial directories failed
    #: the platform's workers in reuse mode (:mod:`.reuse`); None: one job per trial attempt
    fleet: WorkerFleet | None = None

    # ---- what the platform provides ------------------------------------------------------------------------

    @property
    @abstractmethod
    def job_watcher(self) -> JobWatcher[J]: ...

    @abstractmethod
    def _outcomes(self, trial: LiveTrial[BH]) -> OutcomeTable[J]:
        """The table that decides how this trial ended."""

    @property
    @abstractmethod
    def trial_files(self) -> TrialFiles: ...

    def _job_id(self, trial: LiveTrial[BH]) -> str:
        handle: Mapping[str, Any] = trial.handle  # job_key names a key of the platform's handle
        return str(handle[self.job_key])

    def _job_running(self, job: J) -> bool:
        """The job runs (the trial counts as started even before its keeper wrote keeper.json)."""
        return job.meaning.status is TrialStatus.RUNNING

    def _waiting_reason(self, job: J) -> str | None:
        """Why the platform still holds the job, or None when it does not."""
        return job.meaning.reason if job.meaning.status is TrialStatus.WAITING else None

    def _result_grace(self, trial: LiveTrial, job: J, keeper_started: bool) -> float:
        """How long after the trial's job ended result.json may still be on its way here."""
        return RESULT_GRACE

    def _end_near(self, trial: LiveTrial[BH], look: TrialLook) -> bool:
        """The trial's end is near (its keeper recorded it, or it was cancelled): the watcher hurries."""
        return look.result is not None or trial.cancel_status is not None

    async def _end_job(self, trial: LiveTrial[BH]) -> None:
        """End the trial's job (the platform's kill or cancel), for :attr:`ends_abandoned_jobs`."""

    async def _still_ending(self, trial: LiveTrial[BH], job: J | None) -> None:
        """A poll at a trial whose end is near but not decided yet (a cancel to confirm)."""

    async def _trial_ended(self, trial: LiveTrial[BH], ended: TrialEnded, view: JobView[J]) -> None:
        """After the trial's end was decided (before its job is forgotten)."""

    # ---- the collect loop --------------------------------------------------------------------------------

    def _table(self, trial: LiveTrial[BH]) -> OutcomeTable[Any]:
        """The outcome table of this trial: its worker's when it runs in one."""
        if runs_in_worker(trial.handle):
            return WorkerOutcomes(self.platform)
        return self._outcomes(trial)

    async def _adopt(self, trial: LiveTrial[BH]) -> None:
        self.job_watcher.watch(self._job_id(trial))
        if self.fleet is not None and runs_in_worker(trial.handle):
            self.fleet.adopt(trial)
        try:
            trial.started = await self.trial_files.exists(trial.handle["trial_dir"], KEEPER_RECORD)
        except PlatformError as exc:  # the next poll looks again
            log.warning("%s: cannot look at trial %s yet: %s", self.platform, trial.trial_id, exc)
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial[BH]]) -> PollBatch:
        looks = await self._look(trials)
        if self.fleet is not None:
            await self.fleet.maintain()
        if looks is None:
            return PollBatch()
        batch = PollBatch()
        for trial in trials:
            batch.extend(await self._collect_one(trial, looks[trial.trial_id]))
        return batch

    async def _look(self, trials: list[LiveTrial[BH]]) -> dict[str, TrialLook] | None:
        """The watcher's refresh and one look at every trial directory; None: they cannot be read now."""
        await self.job_watcher.refresh()
        return await self._read_trial_dirs(trials)

    async def _read_trial_dirs(self, trials: list[LiveTrial[BH]]) -> dict[str, TrialLook] | None:
        try:
            looks = await self.trial_files.look(trials)
        except (
            OSError,
            PlatformError,
        ) as exc:  # nothing was read: the next look starts from the same cursors
            if self._unreadable is None:
                log.warning("%s: cannot read the trial directories (retried): %s", self.platform, exc)
            self._unreadable = str(exc)
            return None
        if self._unreadable is not None:
            log.info("%s: the trial directories are readable again", self.platform)
            self._unreadable = None
        return looks

    async def _collect_one(self, trial: LiveTrial[BH], look: TrialLook) -> PollBatch:
        job_id, watcher = self._job_id(trial), self.job_watcher
        job = watcher.jobs.get(job_id)
        # not trial.started alone: a job may run its setup before the keeper is there
        keeper_started = bool(trial.state.get("keeper_started") or look.keeper_started)
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        # a worker's job runs before it takes the trial: only the keeper says that the trial started
        job_running = job is not None and not runs_in_worker(trial.handle) and self._job_running(job)
        if not trial.started and (keeper_started or job_running):
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = trial.waiting_changed(self._waiting_reason(job) if job is not None else None)
        view = self._view(trial, look, job, keeper_started)
        ended = self._table(trial).outcome(trial.trial_id, view)
        if ended is None and self._end_near(trial, look):
            watcher.hurry()  # the end is near: learn the platform's side of it soon
            await self._still_ending(trial, job)
        if look.more:
            ended = None  # metrics are still to be read: the end comes after them
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
            if self.ends_abandoned_jobs and not runs_in_worker(trial.handle) and _abandoned(ended, view):
                await self._end_job(trial)
            await self._trial_ended(trial, ended, view)
            if self.fleet is not None:
                await self.fleet.trial_ended(trial, ended)
            if not self._job_shared(trial, job_id):
                watcher.forget(job_id)
        return batch

    def _job_shared(self, trial: LiveTrial[BH], job_id: str) -> bool:
        """Another live trial runs in the same job, or a worker runs as that job (:mod:`.reuse`)."""
        if self.fleet is not None and self.fleet.holds(job_id):
            return True
        return any(other is not trial and self._job_id(other) == job_id for other in self.live.values())

    def _view(self, trial: LiveTrial[BH], look: TrialLook, job: J | None, keeper_started: bool) -> JobView[J]:
        """What the outcome table is given of the trial at this poll."""
        job_id = self._job_id(trial)
        since = self.job_watcher.ended_for(job_id)
        settled = job is not None and since is not None and since >= self._result_grace(trial, job, keeper_started)
        gone = self.job_watcher.gone(job_id)
        return JobView(look.result, job, keeper_started, trial.cancel_status, gone, settled)

    # ---- files ---------------------------------------------------------------------------------------------

    async def _read_file(self, handle: BH, name: str) -> bytes:
        return await self.trial_files.read(handle["trial_dir"], name)

    def trial_dir_here(self, handle: BH) -> Path | None:
        return self.trial_files.here(handle["trial_dir"])


def _abandoned(ended: TrialEnded, view: JobView[Any]) -> bool:
    """Given up as an infrastructure failure while the job may run on (paused, requeued, its node lost)."""
    return ended.failure_kind is FailureKind.INFRASTRUCTURE and (view.job is None or not view.job.ended)
