"""Azure ML training service: every trial attempt is one command job of the workspace (SDK v2).

The code directory is staged once per experiment with ``.trialfleet/`` (keeper, ``nni`` shim, forwarder)
beside it, and the SDK uploads that snapshot once (it reuses a snapshot of the same content). Each job runs the
forwarder (:mod:`.forwarder`), which runs the keeper and ships the trial directory to the job's MLflow run; the
manager mirrors the run into the trial's directory here (:mod:`.mirror`) and reads it as every platform does,
so metrics arrive in order and exactly once through the cursors. Job names are chosen here per attempt
(:func:`~.job.job_name`) and kept in the handle: ``submit`` finds a job it launched already, and a restarted
manager re-adopts its jobs. Reads of the workspace back off while nothing changes (:class:`JobWatcher`).
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
)
from trialfleet.training_services.aml.mirror import ACK_TAG, acknowledged, apply_window
from trialfleet.training_services.aml.status import AML_OUTCOMES, AmlJob, AmlOutcomes
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.batch.service import BatchHandle, BatchJobService
from trialfleet.training_services.batch.watcher import JobWatcher as BatchJobWatcher
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.environment import nni_variables
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.support import extract_archive, support_archive
from trialfleet.training_services.trial_dir import RESULT_RECORD
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles, TrialLook

log = logging.getLogger(__name__)

FORWARDER_SCRIPT = Path(__file__).with_name("forwarder.py")
LOG_ALIASES = {"std_log.txt": "user_logs/std_log.txt"}  # read_trial_file names served from the run's logs
SHUTDOWN_WAIT = 60.0
#: how long the forwarder takes at most to ship what a trial wrote (it ships every 0.5 s, plus the request)
SHIP_PERIOD = 1.0


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
        self.mirrors: dict[str, Path] = {}  # job name → the trial directory its run is shipped into
        self._shipped = 0

    def mirror(self, name: str, trial_dir: Path) -> None:
        self.mirrors[name] = trial_dir
        self.watch(name)

    def forget(self, job_id: str) -> None:
        super().forget(job_id)
        self.mirrors.pop(job_id, None)

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
        tags = self.client.run_tags(name) if job is not None else None
        self._shipped += mirror_run(self.client, name, self.mirrors[name], tags or {})
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
    os.replace(staging, target)
    return target


class AmlHandle(BatchHandle):
    job_name: str


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

    async def _prepare(self) -> None:
        self.client = self.watcher.client = await asyncio.to_thread(AmlClient, self.config)
        await asyncio.to_thread(self.client.check)

    @property
    def _client(self) -> AmlClient:
        assert self.client is not None, "start() first"
        return self.client

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[AmlHandle] | Deferred:
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
        self.watcher.mirror(trial.handle["job_name"], Path(trial.handle["trial_dir"]))
        Path(trial.handle["trial_dir"]).mkdir(parents=True, exist_ok=True)
        await super()._adopt(trial)

    def _job_running(self, job: AmlJob) -> bool:
        return job.status == "Running"

    def _end_near(self, trial: LiveTrial, look: TrialLook) -> bool:
        ended = self.watcher.ended_for(trial.handle["job_name"]) is not None
        return ended or super()._end_near(trial, look)

    async def _end_job(self, trial: LiveTrial) -> None:
        await self._cancel_job(trial.handle["job_name"])

    def trial_dir_here(self, handle: AmlHandle) -> Path | None:
        return None  # a running trial's files are shipped on demand by _read_file

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """Azure ML cancels the job: its processes get SIGTERM, the keeper ends the trial's tree."""
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
            job = handle["job_name"]
            tags = await asyncio.to_thread(self.client.run_tags, job)
            await asyncio.to_thread(mirror_run, self.client, job, trial_dir, tags or {})
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
