"""Azure ML training service: every trial attempt is one command job of the workspace (SDK v2).

The code directory is staged once per experiment with ``.trialfleet/`` (keeper, ``nni`` shim, forwarder)
beside it, and the SDK uploads that snapshot once (it reuses a snapshot of the same content). Each job runs the
forwarder (:mod:`.forwarder`), which runs the keeper and ships the trial directory to the job's MLflow run; the
manager mirrors the run into the trial's directory here (:mod:`.mirror`) and reads it as every platform does,
so metrics arrive in order and exactly once through the cursors. Job names are chosen here per attempt
(:func:`~.job.job_name`) and kept in the handle: ``submit`` finds a job it launched already, and a restarted
manager re-adopts its jobs. Reads of the workspace back off while nothing changes (:class:`LookPacer`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import shutil
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind
from trialfleet.training_services.aml.client import AmlClient, AmlUnavailable
from trialfleet.training_services.aml.config import AmlConfig
from trialfleet.training_services.aml.job import (
    SUPPORT_DIR,
    TrialJob,
    command_job,
    experiment_name,
    job_name,
    trial_variables,
)
from trialfleet.training_services.aml.mirror import apply_chunks
from trialfleet.training_services.aml.status import RESULT_GRACE, AmlJob, trial_outcome
from trialfleet.training_services.base import ExperimentContext, LiveTrial, TrainingService
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.environment import nni_variables
from trialfleet.training_services.events import PollBatch, TrialStarted, TrialWaiting
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.support import extract_archive, support_archive
from trialfleet.training_services.trial_dir import KEEPER_RECORD, RESULT_RECORD
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialLook

log = logging.getLogger(__name__)

FORWARDER_SCRIPT = Path(__file__).with_name("forwarder.py")
LOG_ALIASES = {"std_log.txt": "user_logs/std_log.txt"}  # read_trial_file names served from the run's logs
SHUTDOWN_WAIT = 60.0
#: how long the forwarder takes at most to ship what a trial wrote (it ships every 0.5 s, plus the request)
SHIP_PERIOD = 1.0


class LookPacer:
    """When the workspace is due a look: ``min_interval`` apart while something changes, backing off to
    ``max_interval`` while nothing does; :meth:`hurry` brings the next look forward."""

    def __init__(self, min_interval: float = 1.0, max_interval: float = 10.0) -> None:
        self.min_interval, self.max_interval = min_interval, max_interval
        self._interval = min_interval
        self._next = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def hurry(self) -> None:
        self._interval, self._next = self.min_interval, 0.0

    def looked(self, changed: bool) -> None:
        self._interval = self.min_interval if changed else min(self._interval * 1.5, self.max_interval)
        self._next = time.monotonic() + self._interval


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
    os.replace(staging, target)
    return target


class AmlTrainingService(TrainingService):
    platform = "aml"
    config_class = AmlConfig
    supports_gpu_scheduling = True  # Azure ML places each job on a node of the compute target
    poll_interval = 1.0
    ships_code = True  # staged as a snapshot and uploaded with the first job

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        self.config = cast(AmlConfig, context.service_config)
        self.client: AmlClient | None = None
        self.trials = LocalTrialFiles()  # the mirrors of the jobs' trial directories
        self.pacer = LookPacer()
        self.jobs: dict[str, AmlJob] = {}  # by job name: the last status read
        self.ended_at: dict[str, float] = {}
        self._snapshots: dict[Path, Path] = {}
        self._failing: str | None = None

    async def _prepare(self) -> None:
        self.client = await asyncio.to_thread(AmlClient, self.config)
        await asyncio.to_thread(self.client.check)

    @property
    def _client(self) -> AmlClient:
        assert self.client is not None, "start() first"
        return self.client

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
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

    def _trial_job(self, spec: TrialSpec, name: str) -> TrialJob:
        nni = nni_variables(self.platform, self.context.experiment_id, spec, trial_dir="", code_dir="")
        for inside in ("NNI_SYS_DIR", "NNI_OUTPUT_DIR", "NNI_CODE_DIR"):  # known only in the job: set there
            nni.pop(inside)
        env = trial_variables(nni, spec.env, spec.parameter_record, spec.command, spec.gpu_number)
        tags = {"trialfleet.experiment": self.context.experiment_id, "trialfleet.trial": spec.trial_id}
        tags["trialfleet.attempt"] = str(spec.attempt)
        experiment = experiment_name(self.context.config.experiment_name, self.context.experiment_id)
        return TrialJob(
            name, spec.trial_id, experiment, self.config.compute_target, self.config.docker_image, env, tags
        )

    def _submitted(self, name: str, trial_dir: Path) -> Submitted:
        trial_dir.mkdir(parents=True, exist_ok=True)
        self.pacer.hurry()
        handle = {"job_name": name, "trial_dir": str(trial_dir)}
        return Submitted(handle, f"aml:{self.config.workspace_name}:{name}", started=False)

    # ---- polling ---------------------------------------------------------------------------------------

    async def _adopt(self, trial: LiveTrial) -> None:
        Path(trial.handle["trial_dir"]).mkdir(parents=True, exist_ok=True)
        trial.started = await self.trials.exists(trial.handle["trial_dir"], KEEPER_RECORD)
        self.pacer.hurry()
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        if self.pacer.due():
            changed = await self._look(trials)
            self.pacer.looked(changed)
        looks = await self.trials.look(trials)
        batch = PollBatch()
        for trial in trials:
            batch.extend(self._collect_one(trial, looks[trial.trial_id]))
        ended = [e for e in batch.ended if e.failure_kind is FailureKind.INFRASTRUCTURE]
        for event in ended:  # a trial given up while its job may run on (a node lost, a pause)
            job = self.jobs.get(self.live[event.trial_id].handle["job_name"])
            if job is None or not job.ended:
                await self._cancel_job(self.live[event.trial_id].handle["job_name"])
        for event in batch.ended:
            name = self.live[event.trial_id].handle["job_name"]
            self.jobs.pop(name, None)
            self.ended_at.pop(name, None)
        return batch

    async def _look(self, trials: list[LiveTrial]) -> bool:
        """One read of every live trial's job and MLflow run; the runs' shipments go into the mirrors."""
        answers = await asyncio.gather(
            *(asyncio.to_thread(self._read, t) for t in trials), return_exceptions=True
        )
        changed = False
        for trial, answer in zip(trials, answers, strict=True):
            if isinstance(answer, PlatformError):
                if self._failing != str(answer):
                    log.warning("aml: cannot read job %s (retried): %s", trial.handle["job_name"], answer)
                self._failing = str(answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            self._failing = None
            changed |= answer
        return changed

    def _read(self, trial: LiveTrial) -> bool:
        name = trial.handle["job_name"]
        job = self._client.job(name)
        tags = self._client.run_tags(name) if job is not None else None
        added = apply_chunks(Path(trial.handle["trial_dir"]), tags or {})
        changed = added > 0 or self.jobs.get(name) != job
        if job is not None:
            self.jobs[name] = job
            if job.ended:
                self.ended_at.setdefault(name, time.monotonic())
        return changed

    def _collect_one(self, trial: LiveTrial, look: TrialLook) -> PollBatch:
        name = trial.handle["job_name"]
        job = self.jobs.get(name)
        keeper_started = bool(trial.state.get("keeper_started") or look.keeper_started)
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        if not trial.started and (keeper_started or (job is not None and job.status == "Running")):
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = self._waiting(trial, job)
        since = self.ended_at.get(name)
        ended = trial_outcome(
            trial.trial_id,
            look.result,
            job,
            keeper_started=keeper_started,
            cancel_status=trial.cancel_status,
            settled=since is not None and time.monotonic() - since >= RESULT_GRACE,
        )
        if ended is None and (
            look.result is not None or trial.cancel_status is not None or since is not None
        ):
            self.pacer.hurry()  # the end is near: learn Azure ML's side of it soon
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
        return batch

    @staticmethod
    def _waiting(trial: LiveTrial, job: AmlJob | None) -> list[TrialWaiting]:
        reason = job.meaning.reason if job is not None and job.waiting else None
        return trial.waiting_changed(reason)

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """Azure ML cancels the job: its processes get SIGTERM, the keeper ends the trial's tree."""
        self.pacer.hurry()
        await self._cancel_job(trial.handle["job_name"])

    async def _cancel_job(self, name: str) -> None:
        try:
            await asyncio.to_thread(self._client.cancel, name)
        except PlatformError as exc:
            log.warning("aml: cannot cancel job %s: %s", name, exc)

    async def _read_file(self, handle: Mapping[str, Any], name: str) -> bytes:
        log_name = LOG_ALIASES.get(name, name)
        if log_name.startswith(("user_logs/", "system_logs/")):
            return await asyncio.to_thread(self._client.log_file, handle["job_name"], log_name)
        trial_dir = Path(handle["trial_dir"])
        if self.client is not None and not (trial_dir / RESULT_RECORD).exists():
            # the trial may still run: what it wrote before this read is shipped within one period
            await asyncio.sleep(SHIP_PERIOD)
            tags = await asyncio.to_thread(self.client.run_tags, handle["job_name"])
            apply_chunks(trial_dir, tags or {})
        return await self.trials.read(handle["trial_dir"], name)

    async def _shutdown(self, killed_trials: bool) -> None:
        if self.client is None:
            return
        try:
            if killed_trials:
                await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
        finally:
            await asyncio.to_thread(self.client.close)

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        ended = set()
        for trial in trials:
            try:
                job = await asyncio.to_thread(self._client.job, trial.handle["job_name"])
            except PlatformError:
                continue
            if job is None or job.ended:
                ended.add(trial.trial_id)
        return ended
