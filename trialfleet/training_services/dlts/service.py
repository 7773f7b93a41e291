"""DLTS training service: every trial attempt is one DLTS job, submitted through the cluster's dashboard, or, with
``reuseMode``, runs in a long-lived worker job that runs trial after trial (:mod:`..batch.reuse`).

The trial directories, a copy of the keeper and of the ``nni`` shim, and a copy of the code live on the
cluster's NFS storage, which this machine mounts too (:class:`~.mounted_storage.MountedStorage`); jobs see
it at their ``/work``. Everything but job control goes through those files (docs/trial-directory.md), so
metrics are read exactly once through the cursors as on every platform. Job control is the dashboard's API
(:mod:`.client`): submit, one status read per watched job when a look is due (:class:`~.status.JobWatcher`),
kill, and the job's log. The job id is chosen here per attempt (:func:`~.job.job_id`) and kept in the
handle, so ``submit`` finds a job it launched already and a restarted manager re-adopts its jobs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from trialfleet.errors import PlatformError
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.batch.outcome import JobView
from trialfleet.training_services.batch.reuse import (
    REUSE_POLL_INTERVAL,
    ReusePolicy,
    WorkerFleet,
    runs_in_worker,
    worker_argv,
)
from trialfleet.training_services.batch.service import BatchHandle, BatchJobService
from trialfleet.training_services.batch.workers import REGISTRY
from trialfleet.training_services.dlts.client import DashboardClient, DltsRefused, DltsUnavailable
from trialfleet.training_services.dlts.config import DltsConfig
from trialfleet.training_services.dlts.job import (
    SCRIPT_NAME,
    JobSettings,
    TrialJob,
    WorkerJob,
    job_body,
    launch_script,
    worker_script,
)
from trialfleet.training_services.dlts.status import DLTS_OUTCOMES, DltsJob, DltsOutcomes, JobWatcher
from trialfleet.training_services.environment import job_variables
from trialfleet.training_services.mounted_storage import MountedStorage, on_storage
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_dir import command_record, input_files
from trialfleet.training_services.trial_files import TrialFiles, TrialLook

log = logging.getLogger(__name__)

JOB_LOG = "dlts.log"  # read_trial_file's name for the job's log as DLTS keeps it (the pod's output)
SHUTDOWN_WAIT = 30.0
#: variables DLTS sets in its jobs, read when the config leaves a credential out (a manager run in a job)
ENV_FALLBACKS = {"email": "DLWS_USER_EMAIL", "password": "DLTS_JOB_TOKEN", "team": "DLWS_VC_NAME"}


def _setting(value: str | None, key: str) -> str:
    """``email``, ``password`` or ``team``: the config's value, else the variable DLTS sets in its jobs."""
    if value is not None:
        return value
    fallback = os.environ.get(ENV_FALLBACKS[key])
    if not fallback:
        raise PlatformError(
            f"dlts: `{key}` is not set in the config and ${ENV_FALLBACKS[key]} is not set either "
            "(DLTS sets it only inside its own jobs)"
        )
    return fallback


def storage_mounts(config: DltsConfig, working_directory: Path) -> tuple[Path, str]:
    """The storage's mount point here and in jobs; both unset in the config, NNI's layout: the experiments'
    working directory is on the storage, at the same path in jobs."""
    local, container = config.local_storage_mount_point, config.container_storage_mount_point
    if local is None and container is None:
        working = Path(working_directory).absolute()
        return working, str(working)
    return (local or Path(str(container))), str(container)


class DltsHandle(BatchHandle):
    job_id: str
    job_name: str


LiveTrial = base.LiveTrial[DltsHandle]


class DltsTrainingService(BatchJobService[DltsConfig, DltsJob, DltsHandle]):
    platform = "dlts"
    config_class = DltsConfig
    poll_interval = 1.0  # trial directories; the dashboard itself is read by the watcher's back-off
    ends_abandoned_jobs = True  # a paused or requeued job must not run this attempt again
    ships_code = True  # copied to the storage, unless it is there already

    @classmethod
    def shipped_code_directories(cls, service_config: DltsConfig, working_directory: Path) -> list[Path]:
        mount_local, _ = storage_mounts(service_config, working_directory)
        code_dir = Path(service_config.trial_code_directory)
        return [] if on_storage(code_dir, mount_local) else [code_dir]

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        local, remote = self._mounts()
        self.storage = MountedStorage(local, remote, context.experiment_id)
        self.client: DashboardClient | None = None
        self.watcher: JobWatcher | None = None
        self.team = ""
        self.gpu_type = ""

    def _mounts(self) -> tuple[Path, str]:
        return storage_mounts(self.config, self.context.experiment_dir.parent)

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        config = self.config
        secret = config.password.get_secret_value() if config.password is not None else None
        email, password = _setting(config.email, "email"), _setting(secret, "password")
        self.team = _setting(config.team, "team")
        self.client = DashboardClient(self.config.dashboard, self.config.cluster, email, password)
        self.watcher = JobWatcher(self.client)
        if self.config.reuse_mode:
            idle = float(self.config.worker_idle_timeout)
            self.reuse_policy = ReusePolicy.of(self.config.trial_gpu_number, 1, idle)
            registry = self.context.experiment_dir / REGISTRY
            self.fleet = WorkerFleet(
                self, self.storage.trials, self.storage.remote, self.watcher, self.reuse_policy, registry=registry
            )
            self.poll_interval = REUSE_POLL_INTERVAL
        try:
            self.gpu_type = self.config.gpu_type or await self.client.gpu_type(self.team)
            await self.storage.prepare()
        except PlatformError:
            await self.client.close()
            raise

    @property
    def _client(self) -> DashboardClient:
        assert self.client is not None, "start() first"
        return self.client

    @property
    def _watcher(self) -> JobWatcher:
        assert self.watcher is not None, "start() first"
        return self.watcher

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[DltsHandle] | Deferred:
        trial_dir = self.storage.trial_dir(attempt_name(spec.trial_id, spec.attempt))
        if self.fleet is not None:
            return await self._launch_in_worker(spec, trial_dir)
        try:
            job = self._trial_job(spec, trial_dir, "")
            log.debug("dlts: trial %s is job %s (%s)", spec.trial_id, job.job_id, job.name)
        except ValueError as exc:
            raise PlatformError(f"dlts: {exc}") from exc
        try:
            if await self._client.job(job.job_id) is not None:  # launched by an earlier manager
                log.info("dlts: trial %s already has job %s; adopting it", spec.trial_id, job.job_id)
                return self._submitted(job)
            code_dir = await self.storage.code_dir(spec.code_dir)
            job = self._trial_job(spec, trial_dir, code_dir)
            await self._write_inputs(spec, job, code_dir)
            await self._client.submit(job_body(job, self._settings(spec)))
        except DltsUnavailable as exc:  # the submit may have happened: the next offer finds the job by its id
            return Deferred(f"the DLTS dashboard is unavailable: {exc}")
        except DltsRefused:
            if await self._client.job(job.job_id) is None:  # not a second submit of the same id
                raise
        return self._submitted(job)

    async def _launch_in_worker(self, spec: TrialSpec, trial_dir: str) -> Submitted[DltsHandle] | Deferred:
        """Reuse mode: the trial's inputs, its own environment in command.json, given to a worker."""
        assert self.fleet is not None
        try:
            code_dir = await self.storage.code_dir(spec.code_dir)
            env = job_variables(
                self.platform, self.context.experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir
            )
            command = command_record(["/bin/bash", "-c", spec.command], code_dir, env)
            here = {"trial_dir_here": str(self.storage.to_local(trial_dir))}  # as _submitted's
            return await self.fleet.launch(spec, trial_dir, input_files(spec.parameter_record, command), here)
        except DltsUnavailable as exc:  # a worker submitted may be lost: it ends itself when idle
            return Deferred(f"the DLTS dashboard is unavailable: {exc}")

    async def start_worker(self, name: str, worker_dir: str) -> str:
        """Reuse mode: submit a worker's job (:class:`~..batch.reuse.WorkerJobs`)."""
        trials = f"{self.storage.remote}/trials"
        argv = tuple(worker_argv(self.storage.layout.worker, worker_dir, trials, self.reuse_policy))
        job = WorkerJob(self.context.experiment_id, name, worker_dir, argv, self.storage.layout.shim_dir)
        await self.storage.trials.write(worker_dir, {SCRIPT_NAME: worker_script(job)})
        settings = dataclasses.replace(self._settings(None), gpus=self.config.trial_gpu_number or 0)
        await self._client.submit(job_body(job, settings))
        return job.job_id

    async def end_worker(self, job_id: str) -> None:
        try:
            await self._client.kill(job_id)
        except PlatformError as exc:
            log.warning("dlts: cannot kill worker job %s (retried): %s", job_id, exc)

    async def _write_inputs(self, spec: TrialSpec, job: TrialJob, code_dir: str) -> None:
        # env None: the trial inherits the job's environment (DLTS's variables, its GPUs) and the script's
        command = command_record(["/bin/bash", "-c", spec.command], code_dir, None)
        files = input_files(spec.parameter_record, command)
        files[SCRIPT_NAME] = launch_script(job)  # private, as command.json: it holds environment values
        await self.storage.trials.write(job.trial_dir, files)

    def _trial_job(self, spec: TrialSpec, trial_dir: str, code_dir: str) -> TrialJob:
        paths = (trial_dir, code_dir, self.storage.layout)
        return TrialJob.of(self.platform, self.context.experiment_id, spec, paths)

    def _settings(self, spec: TrialSpec | None) -> JobSettings:
        return JobSettings(
            team=self.team,
            email=self._client.email,
            gpu_type=self.gpu_type,
            image=self.config.image,
            gpus=(spec.gpu_number or 0) if spec is not None else 0,
            preemption_allowed=self.config.preemption_allowed,
        )

    def _submitted(self, job: TrialJob) -> Submitted[DltsHandle]:
        self._watcher.watch(job.job_id)
        handle: DltsHandle = {"job_id": job.job_id, "job_name": job.name, "trial_dir": job.trial_dir}
        # where this machine sees it: `log` and `view` read a finished experiment's files there
        handle["trial_dir_here"] = str(self.storage.to_local(job.trial_dir))
        return Submitted(handle, f"dlts:{self.config.cluster}:{job.job_id}:{job.trial_dir}", started=False)

    # ---- polling ---------------------------------------------------------------------------------------

    @property
    def job_watcher(self) -> JobWatcher:
        return self._watcher

    def _outcomes(self, trial: LiveTrial) -> DltsOutcomes:
        return DLTS_OUTCOMES

    @property
    def trial_files(self) -> TrialFiles:
        return self.storage.trials

    def _job_running(self, job: DltsJob) -> bool:
        return job.status == "running"

    def _view(
        self, trial: LiveTrial, look: TrialLook, job: DltsJob | None, keeper_started: bool
    ) -> JobView[DltsJob]:
        view = super()._view(trial, look, job, keeper_started)
        return dataclasses.replace(view, job=self._current(trial, look, job))

    def _current(self, trial: LiveTrial, look: TrialLook, job: DltsJob | None) -> DltsJob | None:
        """The job's state, or None when the keeper recorded a cancel nobody here asked for and DLTS has not
        been asked since: only a fresh state tells a kill elsewhere from a pause or a preemption."""
        if look.result is None or not look.result.get("canceled") or trial.cancel_status is not None:
            return job
        seen_at = trial.state.setdefault("foreign_cancel_at", self._watcher.clock())
        if self._watcher.read_at.get(trial.handle["job_id"], float("-inf")) <= seen_at:
            self._watcher.reread(trial.handle["job_id"])
            return None
        return job

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """DLTS deletes the job's pod: the keeper, its main process, gets SIGTERM and ends the trial's tree."""
        if self.fleet is not None and runs_in_worker(trial.handle):
            await self.fleet.cancel(trial)  # the worker signals the keeper, which ends the trial's tree
            return
        self._watcher.hurry()
        await self._end_job(trial)

    async def _end_job(self, trial: LiveTrial) -> None:
        """Also for a trial given up as paused or requeued: it must not run this attempt again."""
        job_id = trial.handle["job_id"]
        try:
            await self._client.kill(job_id)
        except PlatformError as exc:
            log.warning("dlts: cannot kill job %s: %s", job_id, exc)

    async def _read_file(self, handle: DltsHandle, name: str) -> bytes:
        if name == JOB_LOG:
            return (await self._client.log(handle["job_id"])).encode()
        return await super()._read_file(handle, name)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials and self.client is not None:
            await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
            if self.fleet is not None:
                await self.fleet.close()
        if self.client is not None:
            await self.client.close()
        await self.storage.close()

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        """The cancelled trials whose keeper recorded its end, or whose job DLTS no longer runs."""
        ended = await self.storage.trials.ended(trials)
        for trial in trials:
            if trial.trial_id in ended:
                continue
            try:
                detail = await self._client.job(trial.handle["job_id"])
            except PlatformError:
                continue
            if detail is None or not DltsJob.from_detail(trial.handle["job_id"], detail).active:
                ended.add(trial.trial_id)
        return ended
