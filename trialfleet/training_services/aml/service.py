"""Azure ML training service: trials run in long-lived worker jobs of the workspace, trial after trial (reuse mode,
NNI's AML mode, :mod:`.reuse`), or every trial attempt is one command job (``reuseMode: false``; SDK v2).

The code directory is staged once per experiment with ``.trialfleet/`` (keeper, ``nni`` shim, forwarder)
beside it, and the SDK uploads that snapshot once (it reuses a snapshot of the same content). Each job runs the
forwarder (:mod:`.forwarder`), which runs the keeper and ships the trial directory to the job's MLflow run; the
manager mirrors the run into the trial's directory here (:mod:`.mirror`) and reads it as every platform does,
so metrics arrive in order and exactly once through the cursors. Job names are chosen here per attempt
(:func:`~.job.job_name`) and kept in the handle: ``submit`` finds a job it launched already, and a restarted
manager re-adopts its jobs. Reads of the workspace back off while nothing changes (:class:`JobWatcher`).

In reuse mode a worker job runs ``worker_relay.py`` instead, and each attempt given to it has an MLflow run of its
own (made here, its inputs in its tags) into which the worker ships the attempt's directory: the handle names the
worker's job (``job_name``) and the attempt's run (``run_id``), which is what is mirrored.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from trialfleet.errors import PlatformError
from trialfleet.training_services import base
from trialfleet.training_services.aml.client import AmlClient, AmlUnavailable
from trialfleet.training_services.aml.config import AmlConfig
from trialfleet.training_services.aml.job import (
    SUPPORT_DIR,
    TrialJob,
    command_job,
    experiment_name,
    job_name,
    trial_variables,
    worker_command,
    worker_job_name,
)
from trialfleet.training_services.aml.mirror import ACK_TAG, acknowledged, apply_window
from trialfleet.training_services.aml.reuse import ATTEMPT_TAG, MAX_WORKER_TRIALS, AmlMailbox, input_tags
from trialfleet.training_services.aml.status import AML_OUTCOMES, AmlJob, AmlOutcomes
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.batch.outcome import JobView
from trialfleet.training_services.batch.reuse import (
    ASSIGNMENT,
    WORKER_IDLE_MARGIN,
    ReusePolicy,
    WorkerFleet,
    runs_in_worker,
)
from trialfleet.training_services.batch.service import BatchHandle, BatchJobService
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.batch.workers import REGISTRY
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.environment import gpu_variables, nni_variables
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.support import extract_archive, support_archive
from trialfleet.training_services.trial_dir import RESULT_RECORD
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles, TrialLook

log = logging.getLogger(__name__)

FORWARDER_SCRIPT = Path(__file__).with_name("forwarder.py")
WORKER_RELAY_SCRIPT = Path(__file__).with_name("worker_relay.py")
LOG_ALIASES = {"std_log.txt": "user_logs/std_log.txt"}  # read_trial_file names served from the run's logs
SHUTDOWN_WAIT = 60.0
#: how long the forwarder takes at most to ship what a trial wrote (it ships every 0.5 s, plus the request)
SHIP_PERIOD = 1.0
#: reuse mode: the longest between two looks (instead of 10 s): a trial's end is what frees its worker for the
#: next one, so a quiet trial's end is looked for at least this often (a jobs.get per worker, a runs/get per trial)
REUSE_MAX_INTERVAL = 2.0


class JobWatcher(BatchJobWatcher[AmlJob]):
    """Reads every watched job of the workspace and its MLflow run when a look is due, shipping what the run
    holds into the trial's mirror (a shipment counts as a change); see :mod:`..batch.watcher`."""

    platform = "aml"
    missing_looks = None  # a job not found is not visible yet: Azure ML keeps the jobs it accepted
    requery_ended = True  # an ended job's run may still hold files the mirror lacks

    MIN_INTERVAL, MAX_INTERVAL = 1.0, 10.0

    def __init__(self) -> None:
        super().__init__()
        self.client: AmlClient | None = None
        #: run id → (the job it belongs to, the trial directory it is shipped into): a job's own run, or in reuse
        #: mode the run of each attempt given to a worker job
        self.mirrors: dict[str, tuple[str, Path]] = {}
        self._shipped = 0

    def mirror(self, run_id: str, trial_dir: Path, job: str | None = None) -> None:
        self.mirrors[run_id] = (job or run_id, trial_dir)
        self.watch(job or run_id)

    def unmirror(self, run_id: str) -> None:
        self.mirrors.pop(run_id, None)

    def forget(self, job_id: str) -> None:
        super().forget(job_id)
        for run_id, (job, _) in list(self.mirrors.items()):
            if job == job_id:
                self.mirrors.pop(run_id, None)

    async def query(self, job_ids: list[str]) -> dict[str, AmlJob]:
        self._shipped = 0
        answers = await asyncio.gather(
            *(asyncio.to_thread(self._read, name) for name in job_ids), return_exceptions=True
        )
        found = {}
        for name, answer in zip(job_ids, answers, strict=True):
            if isinstance(answer, PlatformError):
                self.unread(name, answer)
            elif isinstance(answer, BaseException):
                raise answer
            elif answer is not None:
                found[name] = answer
        return found

    def _read(self, name: str) -> AmlJob | None:
        assert self.client is not None, "start() first"
        job = self.client.job(name)
        if job is None:
            return None
        for run_id, (owner, trial_dir) in list(self.mirrors.items()):
            if owner == name:
                tags = self.client.run_tags(run_id)
                self._shipped += mirror_run(self.client, run_id, trial_dir, tags or {})
        return job

    async def _looked(self, found: Mapping[str, AmlJob], changed: bool) -> bool:
        return self._shipped > 0


def mirror_run(client: AmlClient, name: str, trial_dir: Path, tags: Mapping[str, str]) -> int:
    """Apply the run's window to the trial's mirror and acknowledge what the mirror holds, so that the forwarder
    ships the next pieces; the bytes added."""
    added, held = apply_window(trial_dir, tags)
    if held and held != acknowledged(tags):
        client.set_tag(name, ACK_TAG, json.dumps(held, separators=(",", ":")))
    return added


def stage_snapshot(code_dir: Path, root: Path) -> Path:
    """The code directory (``.nniignore`` honoured, NNI's limits checked) with ``.trialfleet/`` beside it."""
    source = code_dir.resolve()
    target = root / code_copy_name(source)
    if target.exists():
        return target
    staging = target.with_name(target.name + f".tmp.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    for relative in check_code_dir(source):
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, staging / relative, follow_symlinks=True)
    support = staging / SUPPORT_DIR
    with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
        extract_archive(tar, support)
    shutil.copyfile(FORWARDER_SCRIPT, support / "forwarder.py")
    shutil.copyfile(WORKER_RELAY_SCRIPT, support / "worker_relay.py")
    os.replace(staging, target)
    return target


class AmlRunKey(TypedDict, total=False):
    run_id: str  # reuse mode: the attempt's MLflow run (its job_name is its worker's job)


class AmlHandle(BatchHandle, AmlRunKey):
    job_name: str


def run_of(handle: AmlHandle) -> str:
    """The MLflow run the trial's directory is shipped into."""
    return handle.get("run_id") or handle["job_name"]


LiveTrial = base.LiveTrial[AmlHandle]


class AmlTrainingService(BatchJobService[AmlConfig, AmlJob, AmlHandle]):
    platform = "aml"
    config_class = AmlConfig
    poll_interval = 1.0
    job_key = "job_name"
    ends_abandoned_jobs = True  # a trial given up while its job may run on (a node lost, a pause)
    ships_code = True  # staged as a snapshot and uploaded with the first job

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        self.client: AmlClient | None = None
        self.trials = LocalTrialFiles()  # the mirrors of the jobs' trial directories
        self.watcher = JobWatcher()
        self._snapshots: dict[Path, Path] = {}
        self.reuse_policy = ReusePolicy()
        self._worker_code: Path | None = None  # the snapshot worker jobs are made from

    async def _prepare(self) -> None:
        self.client = self.watcher.client = await asyncio.to_thread(AmlClient, self.config)
        await asyncio.to_thread(self.client.check)
        if self.config.reuse_mode:
            config = self.config
            idle = float(config.worker_idle_timeout)
            per_gpu = config.max_trial_number_per_gpu
            if per_gpu > MAX_WORKER_TRIALS and config.trial_gpu_number:
                log.warning(
                    "aml: a worker job runs at most %d trials at once (its mailbox is one MLflow tag), not %d",
                    MAX_WORKER_TRIALS,
                    per_gpu,
                )
                per_gpu = MAX_WORKER_TRIALS
            self.reuse_policy = ReusePolicy.of(config.trial_gpu_number, per_gpu, idle)
            self.fleet = WorkerFleet(
                self,
                self.trials,
                str(self.context.experiment_dir / "aml"),  # the workers' directories are in their jobs
                self.watcher,
                self.reuse_policy,
                job_key=self.job_key,
                registry=self.context.experiment_dir / REGISTRY,
                mailbox=AmlMailbox(self.client, self.context.trials_dir),
            )
            self.watcher.max_interval = REUSE_MAX_INTERVAL

    @property
    def _client(self) -> AmlClient:
        assert self.client is not None, "start() first"
        return self.client

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[AmlHandle] | Deferred:
        if self.fleet is not None:
            return await self._launch_in_worker(spec)
        return await self._launch_job(spec)

    async def _launch_job(self, spec: TrialSpec) -> Submitted[AmlHandle] | Deferred:
        try:
            name = job_name(self.context.experiment_id, spec.trial_id, spec.attempt)
        except ValueError as exc:
            raise PlatformError(f"aml: {exc}") from exc
        trial_dir = self.context.trials_dir / attempt_name(spec.trial_id, spec.attempt)
        try:
            if await asyncio.to_thread(self._client.job, name) is not None:  # launched by an earlier manager
                log.info("aml: trial %s already has job %s; adopting it", spec.trial_id, name)
                return self._submitted(name, trial_dir)
            code = await self._snapshot(spec.code_dir)
            job = command_job(self._trial_job(spec, name), str(code))
            await asyncio.to_thread(self._client.submit, job)
        except AmlUnavailable as exc:  # it may have been created: the next offer finds it by its name
            return Deferred(f"Azure ML is unavailable: {exc}")
        return self._submitted(name, trial_dir)

    async def _snapshot(self, code_dir: Path) -> Path:
        if code_dir not in self._snapshots:
            root = self.context.experiment_dir / "aml" / "snapshots"
            try:
                self._snapshots[code_dir] = await asyncio.to_thread(stage_snapshot, code_dir, root)
            except OSError as exc:
                raise PlatformError(f"aml: cannot stage the code directory {code_dir}: {exc}") from exc
        return self._snapshots[code_dir]

    def _nni_variables(self, spec: TrialSpec) -> dict[str, str]:
        nni = nni_variables(self.platform, self.context.experiment_id, spec, trial_dir="", code_dir="")
        for inside in ("NNI_SYS_DIR", "NNI_OUTPUT_DIR", "NNI_CODE_DIR"):  # known only in the job: set there
            nni.pop(inside)
        return nni

    @property
    def _experiment(self) -> str:
        return experiment_name(self.context.config.experiment_name, self.context.experiment_id)

    def _trial_job(self, spec: TrialSpec, name: str) -> TrialJob:
        env = trial_variables(
            self._nni_variables(spec), spec.env, spec.parameter_record, spec.command, spec.gpu_number
        )
        tags = {"trialfleet.experiment": self.context.experiment_id, "trialfleet.trial": spec.trial_id}
        tags["trialfleet.attempt"] = str(spec.attempt)
        return TrialJob(
            name,
            spec.trial_id,
            self._experiment,
            self.config.compute_target,
            self.config.docker_image,
            env,
            tags,
        )

    # ---- reuse mode ------------------------------------------------------------------------------------

    async def _launch_in_worker(self, spec: TrialSpec) -> Submitted[AmlHandle] | Deferred:
        """The attempt, its inputs in an MLflow run of its own, given to a worker job (:mod:`.reuse`)."""
        assert self.fleet is not None
        attempt = attempt_name(spec.trial_id, spec.attempt)
        trial_dir = self.context.trials_dir / attempt
        env = {**self._nni_variables(spec), **spec.env, **gpu_variables(spec.gpu_number, None)}
        try:
            inputs = input_tags(spec.parameter_record, spec.command, env, None)
        except ValueError as exc:
            log.warning("aml: trial %s runs in a job of its own: %s", spec.trial_id, exc)
            return await self._launch_job(spec)
        extra: dict[str, str] = {}
        try:
            self._worker_code = await self._snapshot(spec.code_dir)
            if not (trial_dir / ASSIGNMENT).exists():  # else given to a worker already, with its run
                tags = {ATTEMPT_TAG: attempt, "trialfleet.experiment": self.context.experiment_id, **inputs}
                extra["run_id"] = await asyncio.to_thread(
                    self._client.create_run, self._experiment, attempt, tags
                )
            submitted = await self.fleet.launch(spec, str(trial_dir), {}, extra)
        except AmlUnavailable as exc:  # a worker submitted may be lost: it ends itself when idle
            return Deferred(f"Azure ML is unavailable: {exc}")
        handle: AmlHandle = submitted.handle
        self.watcher.mirror(run_of(handle), trial_dir, handle["job_name"])
        location = f"aml:{self.config.workspace_name}:{handle['job_name']}:{run_of(handle)}"
        return Submitted(handle, location, started=False)

    async def start_worker(self, name: str, worker_dir: str) -> str:
        """Reuse mode: submit a worker's job (:class:`~..batch.reuse.WorkerJobs`)."""
        job_id = worker_job_name(self.context.experiment_id, name)
        command = worker_command(self.reuse_policy.idle_timeout + WORKER_IDLE_MARGIN)
        env = gpu_variables(self.config.trial_gpu_number, None)
        tags = {"trialfleet.experiment": self.context.experiment_id, "trialfleet.worker": name}
        job = TrialJob(
            job_id,
            f"worker {name}",
            self._experiment,
            self.config.compute_target,
            self.config.docker_image,
            env,
            tags,
            command,
        )
        assert self._worker_code is not None, "a trial's launch stages the code first"
        await asyncio.to_thread(self._client.submit, command_job(job, str(self._worker_code)))
        return job_id

    async def end_worker(self, job_id: str) -> None:
        await self._cancel_job(job_id)

    def _submitted(self, name: str, trial_dir: Path) -> Submitted[AmlHandle]:
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.watcher.mirror(name, trial_dir)
        handle: AmlHandle = {"job_name": name, "trial_dir": str(trial_dir)}
        return Submitted(handle, f"aml:{self.config.workspace_name}:{name}", started=False)

    # ---- polling ---------------------------------------------------------------------------------------

    @property
    def job_watcher(self) -> JobWatcher:
        return self.watcher

    @property
    def trial_files(self) -> TrialFiles:
        return self.trials

    def _outcomes(self, trial: LiveTrial) -> AmlOutcomes:
        return AML_OUTCOMES

    async def _adopt(self, trial: LiveTrial) -> None:
        self.watcher.mirror(run_of(trial.handle), Path(trial.handle["trial_dir"]), trial.handle["job_name"])
        Path(trial.handle["trial_dir"]).mkdir(parents=True, exist_ok=True)
        await super()._adopt(trial)

    def _job_running(self, job: AmlJob) -> bool:
        return job.status == "Running"

    def _end_near(self, trial: LiveTrial, look: TrialLook) -> bool:
        ended = self.watcher.ended_for(trial.handle["job_name"]) is not None
        return ended or super()._end_near(trial, look)

    async def _end_job(self, trial: LiveTrial) -> None:
        await self._cancel_job(trial.handle["job_name"])

    async def _trial_ended(self, trial: LiveTrial, ended: TrialEnded, view: JobView[AmlJob]) -> None:
        if runs_in_worker(trial.handle):  # its worker's job goes on: its run is read no more
            self.watcher.unmirror(run_of(trial.handle))

    def trial_dir_here(self, handle: AmlHandle) -> Path | None:
        return None  # a running trial's files are shipped on demand by _read_file

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """Azure ML cancels the job: its processes get SIGTERM, the keeper ends the trial's tree; a worker's
        trial is cancelled through its worker's mailbox instead (the worker runs on)."""
        if self.fleet is not None and runs_in_worker(trial.handle):
            await self.fleet.cancel(trial)
            return
        self.watcher.hurry()
        await self._cancel_job(trial.handle["job_name"])

    async def _cancel_job(self, name: str) -> None:
        try:
            await asyncio.to_thread(self._client.cancel, name)
        except PlatformError as exc:
            log.warning("aml: cannot cancel job %s: %s", name, exc)

    async def _read_file(self, handle: AmlHandle, name: str) -> bytes:
        log_name = LOG_ALIASES.get(name, name)
        if log_name.startswith(("user_logs/", "system_logs/")):
            return await asyncio.to_thread(self._client.log_file, handle["job_name"], log_name)
        trial_dir = Path(handle["trial_dir"])
        if self.client is not None and not (trial_dir / RESULT_RECORD).exists():
            # the trial may still run: what it wrote before this read is shipped within one period
            await asyncio.sleep(SHIP_PERIOD)
            await self._mirror_now(handle)
        return await self.trials.read(handle["trial_dir"], name)

    async def _mirror_now(self, handle: AmlHandle) -> None:
        assert self.client is not None
        run = run_of(handle)
        tags = await asyncio.to_thread(self.client.run_tags, run)
        await asyncio.to_thread(mirror_run, self.client, run, Path(handle["trial_dir"]), tags or {})

    async def _shutdown(self, killed_trials: bool) -> None:
        if self.client is None:
            return
        try:
            if killed_trials:
                await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
                if self.fleet is not None:
                    await self.fleet.close()
        finally:
            await asyncio.to_thread(self.client.close)

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        ended = set()
        for trial in trials:
            if runs_in_worker(trial.handle):  # its worker runs on: the trial's own end is in its run
                try:
                    await self._mirror_now(trial.handle)
                except PlatformError:
                    continue
                if (Path(trial.handle["trial_dir"]) / RESULT_RECORD).exists():
                    ended.add(trial.trial_id)
                continue
            try:
                job = await asyncio.to_thread(self._client.job, trial.handle["job_name"])
            except PlatformError:
                continue
            if job is None or job.ended:
                ended.add(trial.trial_id)
        return ended
