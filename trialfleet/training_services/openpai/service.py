"""OpenPAI training service: every trial attempt is one OpenPAI job whose task runs the trial keeper, or, in reuse
mode (NNI's default; with the storage mounted here and a job of one task), runs in a long-lived worker job that
runs trial after trial (:mod:`..batch.reuse`).

Everything but job control goes through the storage that OpenPAI mounts into the job's containers and that the
manager's machine mounts too (``localStorageMountPoint`` here, ``containerStorageMountPoint`` in the jobs): the
support bundle, a copy of the code directory and the trial directories live under ``<storage>/<experiment id>/``
(:class:`~..mounted_storage.MountedStorage`), and the manager reads metrics, logs and the keeper's records there
exactly as it reads a local trial directory. Job control is OpenPAI's REST server v2 (:mod:`.client`): a job
protocol posted per attempt, ``executionType: STOP`` to cancel, and one job list call per due poll
(:class:`~.watcher.JobWatcher`). The job's name is in the handle, so a restarted manager re-adopts its jobs, and
``submit`` finds a job it already posted by its name.
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
from trialfleet.training_services.environment import job_variables
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.openpai import cluster
from trialfleet.training_services.openpai.client import OpenpaiClient, PaiApiError, RateLimited
from trialfleet.training_services.openpai.config import OpenpaiConfig
from trialfleet.training_services.openpai.delivery import Delivery, MountedDelivery, delivery_for
from trialfleet.training_services.openpai.protocol import (
    TASK_SCRIPT,
    TaskScript,
    job_name,
    job_protocol,
    protocol_text,
    storage_check,
    task_script,
    worker_job_name,
    worker_task_script,
)
from trialfleet.training_services.openpai.status import (
    OUTCOMES,
    OpenpaiOutcomes,
    PaiJob,
    result_grace,
    waiting_reason,
)
from trialfleet.training_services.openpai.template import JobTemplate
from trialfleet.training_services.openpai.watcher import JobWatcher
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_dir import (
    KEEPER_RECORD,
    LAUNCH_RECORD,
    RESULT_RECORD,
    command_record,
    input_files,
)
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles, TrialLook

log = logging.getLogger(__name__)

SHUTDOWN_WAIT = 60.0
JOB_LOG = "openpai.log"  # the job's first task's own log (OpenPAI's log manager), for what the keeper could not write


class OpenpaiHandle(BatchHandle):
    job: str
    container_trial_dir: str
    tasks: int


LiveTrial = base.LiveTrial[OpenpaiHandle]


class OpenpaiTrainingService(BatchJobService[OpenpaiConfig, PaiJob, OpenpaiHandle]):
    platform = "openpai"
    config_class = OpenpaiConfig
    poll_interval = 1.0  # trial directories on the storage; OpenPAI itself is asked by the watcher's back-off
    job_key = "job"
    #: after OpenPAI refused a submission (60 jobs an hour per user), how often to try again before the
    #: limit's window has passed (the limit may have been raised, or the window's end misread)
    submit_retry_interval = 60.0

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        self.client = OpenpaiClient(
            self.config.host, self.config.username, self.config.token.get_secret_value()
        )
        # with reuse, the list shows the workers' jobs too (nni_exp_<id>_worker_<name>)
        kind = "" if self.config.reuse_mode else "trial_"
        self.watcher = JobWatcher(self.client, f"nni_exp_{context.experiment_id}_{kind}")
        self.trials = LocalTrialFiles()  # handles hold the trial directory as this machine sees it
        self._template: JobTemplate | None = None
        self._delivery: Delivery | None = None
        self._submit_blocked: tuple[float, float, str] | None = None  # (window ends, blocked since, why)
        self._stops: dict[str, float] = {}  # trials to stop → when their STOP is due (until OpenPAI took it)

    @property
    def template(self) -> JobTemplate:
        assert self._template is not None, "the service was not started"
        return self._template

    @property
    def delivery(self) -> Delivery:
        assert self._delivery is not None, "the service was not started"
        return self._delivery

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        try:
            self._template = cluster.load_template(self.config)
            await cluster.check_cluster(self.client, self.config, self.template)
            self._delivery = delivery_for(self.context, self.config, self.template)
            await self.delivery.prepare()
            self._start_fleet()
        except PlatformError:
            await self.client.close()
            raise

    def _start_fleet(self) -> None:
        """Reuse mode (NNI's default here): worker jobs, where the storage is mounted here and the job has one task."""
        if not self.config.reuse_mode:
            return
        delivery = self.delivery
        if not isinstance(delivery, MountedDelivery) or self.template.tasks != 1:
            why = "without localStorageMountPoint" if self.template.tasks == 1 else "for a job of several tasks"
            log.warning("openpai: reuseMode is not acted on %s: every trial attempt is a job of its own", why)
            return
        idle = float(self.config.worker_idle_timeout)
        self.reuse_policy = ReusePolicy.of(self.config.trial_gpu_number, 1, idle)
        root = str(delivery.storage.local)
        registry = self.context.experiment_dir / REGISTRY
        self.fleet = WorkerFleet(
            self, self.trials, root, self.watcher, self.reuse_policy, job_key=self.job_key, registry=registry
        )
        self.poll_interval = REUSE_POLL_INTERVAL

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[OpenpaiHandle] | Deferred:
        if self.fleet is not None:
            return await self._launch_in_worker(spec)
        try:
            name = job_name(self.context.experiment_id, spec.trial_id, spec.attempt)
        except ValueError as exc:
            raise PlatformError(f"openpai: {exc}") from exc
        attempt = attempt_name(spec.trial_id, spec.attempt)
        local_dir = self.delivery.local_dir(attempt)
        submitted = self._submitted(name, local_dir, self.delivery.paths.trial_dir(attempt))
        if any((local_dir / record).exists() for record in (LAUNCH_RECORD, KEEPER_RECORD, RESULT_RECORD)):
            log.info("openpai: trial %s was launched already (job %s); adopting it", spec.trial_id, name)
            return submitted  # its keeper ran: an earlier manager posted the job
        blocked = self._blocked()
        if blocked is not None:
            return Deferred(blocked)
        try:
            if await self._job_exists(name):
                log.info("openpai: trial %s already has job %s; adopting it", spec.trial_id, name)
                return submitted
            setup = await self._deliver(spec, name, attempt, submitted.handle["container_trial_dir"])
            text = protocol_text(self._protocol(spec, name, submitted.handle["container_trial_dir"], setup))
            await self.client.submit(name, text)
        except RateLimited as exc:  # on the job submission (60 an hour) or on any request (600 a minute)
            return Deferred(self._block(exc, submission=exc.what.startswith("submitting")))
        except PaiApiError as exc:
            if exc.code == "ConflictJobError":  # posted before, not visible yet when we asked
                return submitted
            if exc.transient or exc.status == 401:
                return Deferred(f"OpenPAI cannot take the job now: {exc}")
            raise
        return submitted

    async def _launch_in_worker(self, spec: TrialSpec) -> Submitted[OpenpaiHandle] | Deferred:
        """Reuse mode: the trial's inputs, its own environment in command.json, given to a worker."""
        assert self.fleet is not None
        blocked = self._blocked()
        if blocked is not None:
            return Deferred(blocked)
        attempt = attempt_name(spec.trial_id, spec.attempt)
        container_dir = self.delivery.paths.trial_dir(attempt)
        try:
            code_dir = await self.delivery.code_dir(spec.code_dir)
            command = self._command(spec.command, self.template.primary, code_dir, None)
            command["env"] = job_variables(
                self.platform, self.context.experiment_id, spec, trial_dir=container_dir, code_dir=code_dir
            )
            files = input_files(spec.parameter_record, command)
            return await self.fleet.launch(spec, str(self.delivery.local_dir(attempt)), files)
        except RateLimited as exc:
            return Deferred(self._block(exc, submission=exc.what.startswith("submitting")))
        except PaiApiError as exc:
            if exc.transient or exc.status == 401:
                return Deferred(f"OpenPAI cannot take the job now: {exc}")
            raise

    async def start_worker(self, name: str, worker_dir: str) -> str:
        """Reuse mode: post a worker's job (:class:`~..batch.reuse.WorkerJobs`); ``worker_dir`` is this machine's."""
        delivery = self.delivery
        assert isinstance(delivery, MountedDelivery)
        try:
            job = worker_job_name(self.context.experiment_id, name)
        except ValueError as exc:
            raise PlatformError(f"openpai: {exc}") from exc
        in_job = delivery.storage.to_remote(Path(worker_dir))
        trials = posixpath.join(delivery.paths.root, "trials")
        argv = worker_argv(delivery.paths.layout.worker, in_job, trials, self.reuse_policy)
        script = worker_task_script(self.context.experiment_id, job, delivery.paths.layout.shim_dir, argv)
        await self.trials.write(worker_dir, {TASK_SCRIPT: script})
        description = f"trialfleet: reuse-mode worker {name} of experiment {self.context.experiment_id}"
        setup = [storage_check(in_job, self.template)]
        protocol = job_protocol(self.template, name=job, trial_dir=in_job, description=description, setup=setup)
        await self.client.submit(job, protocol_text(protocol))
        return job

    async def end_worker(self, job_id: str) -> None:
        try:
            await self.client.stop(job_id)
        except PaiApiError as exc:
            log.warning("openpai: cannot stop worker job %s yet (retried): %s", job_id, exc)

    def _submitted(self, name: str, local_dir: Path, container_dir: str) -> Submitted[OpenpaiHandle]:
        self.watcher.watch(name)
        handle: OpenpaiHandle = {
            "job": name,
            "trial_dir": str(local_dir),
            "container_trial_dir": container_dir,
            "tasks": self.template.tasks,
        }
        return Submitted(handle, f"openpai:{self.config.username}~{name}:{local_dir}", started=False)

    async def _job_exists(self, name: str) -> bool:
        try:
            await self.client.job(name)
        except PaiApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _blocked(self) -> str | None:
        """Why submissions wait, while OpenPAI's submission limit holds them back."""
        if self._submit_blocked is None:
            return None
        window_end, since, why = self._submit_blocked
        now = time.time()
        if now >= window_end or now >= since + self.submit_retry_interval:
            self._submit_blocked = None
            return None
        return why

    def _block(self, exc: RateLimited, *, submission: bool) -> str:
        now = time.time()
        reset = max(exc.reset, now)
        clock = time.strftime("%H:%M:%S", time.localtime(reset))
        limit = "job submission limit" if submission else "request rate limit"
        why = f"OpenPAI's {limit} is reached (HTTP 429, {self.config.username}); it resets at {clock}"
        self._submit_blocked = (reset, now, why)
        log.warning("openpai: %s", why)
        return why

    def _protocol(self, spec: TrialSpec, name: str, container_dir: str, setup: list[str]) -> dict[str, Any]:
        description = f"trialfleet: trial {spec.trial_id} (attempt {spec.attempt}) of experiment {self.context.experiment_id}"
        return job_protocol(
            self.template, name=name, trial_dir=container_dir, description=description, setup=setup
        )

    async def _deliver(self, spec: TrialSpec, name: str, attempt: str, container_dir: str) -> list[str]:
        """The trial's input files where its tasks find them; the commands each task runs before its script."""
        code_dir = await self.delivery.code_dir(spec.code_dir)
        relay = self.delivery.relay_settings(attempt)
        command = self._command(spec.command, self.template.primary, code_dir, relay)
        files = input_files(spec.parameter_record, command)
        if self.template.tasks > 1:
            for role in self.template.role_commands:
                files[f"command-{role}.json"] = json.dumps(self._command(spec.command, role, code_dir, relay))
        files[TASK_SCRIPT] = task_script(self._task(spec, name, container_dir, code_dir))
        return await self.delivery.deliver(attempt, spec.code_dir, files)

    def _command(
        self, trial_command: str, role: str, code_dir: str, relay: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """``command.json`` of a role's tasks; env None: they inherit the task script's environment."""
        own = self.template.role_commands[role]
        argv = ["/bin/bash", "-c", trial_command if own is None else own]
        return command_record(argv, code_dir, None, relay=relay)

    def _task(self, spec: TrialSpec, name: str, container_dir: str, code_dir: str) -> TaskScript:
        env = job_variables(
            self.platform, self.context.experiment_id, spec, trial_dir=container_dir, code_dir=code_dir
        )
        for own in ("NNI_SYS_DIR", "NNI_OUTPUT_DIR"):  # each task's own directory, set by the script
            env.pop(own)
        return TaskScript(
            experiment_id=self.context.experiment_id,
            trial_id=spec.trial_id,
            attempt=spec.attempt,
            job_name=name,
            trial_dir=container_dir,
            keeper=self.delivery.paths.layout.keeper,
            shim_dir=self.delivery.paths.layout.shim_dir,
            primary_role=self.template.primary,
            several_tasks=self.template.tasks > 1,
            env=env,
        )

    # ---- polling ---------------------------------------------------------------------------------------

    @property
    def job_watcher(self) -> JobWatcher:
        return self.watcher

    @property
    def trial_files(self) -> TrialFiles:
        return self.trials

    def _outcomes(self, trial: LiveTrial) -> OpenpaiOutcomes:
        return OUTCOMES[trial.handle.get("tasks", 1) == 1]

    async def _look(self, trials: list[LiveTrial]) -> dict[str, TrialLook] | None:
        await self._send_stops(trials)
        looks = await self._read_trial_dirs(trials)
        if looks is None:
            return None
        # a job running the trial alone ends with its keeper's result.json: OpenPAI need not be asked about it
        decided = {t.handle["job"] for t in trials if _result_decides(t, looks[t.trial_id])}
        await self.watcher.refresh(skip=decided)
        return looks

    def _waiting_reason(self, job: PaiJob) -> str | None:
        """Why OpenPAI keeps the job waiting, with its virtual cluster's usage."""
        if job.state != "WAITING":
            return None
        return waiting_reason(job, self.watcher.virtual_clusters.get(job.virtual_cluster or "default"))

    def _result_grace(self, trial: LiveTrial, job: PaiJob, keeper_started: bool) -> float:
        return result_grace(job, keeper_started, single_task=trial.handle.get("tasks", 1) == 1)

    async def _trial_ended(self, trial: LiveTrial, ended: TrialEnded, view: JobView[PaiJob]) -> None:
        if view.result is None and view.job is not None and not runs_in_worker(trial.handle):
            await self._keep_job_log(trial)
        self._stops.pop(trial.trial_id, None)

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """``executionType: STOP``: OpenPAI deletes the job's pods, so each keeper ends its trial's process tree
        and records the cancel. Through the relay, the STOP waits for the keeper to have sent what the trial wrote
        until now (the containers' end takes what it had not sent yet). A STOP OpenPAI does not take now (not
        reachable, the job not visible yet) is sent again on the next polls."""
        if self.fleet is not None and runs_in_worker(trial.handle):
            await self.fleet.cancel(trial)  # the worker signals the keeper, which ends the trial's tree
            return
        self.watcher.hurry()
        settle = self.delivery.stop_settle
        self._stops[trial.trial_id] = time.monotonic() + settle
        if settle:
            asyncio.get_running_loop().call_later(settle, self.wakeup.set)
        else:
            await self._send_stops([trial])

    async def _send_stops(self, trials: list[LiveTrial]) -> None:
        """The STOPs that are due, of these trials."""
        now = time.monotonic()
        for trial in trials:
            due = self._stops.get(trial.trial_id)
            if due is None or now < due:
                continue
            try:
                await self.client.stop(trial.handle["job"])
            except PaiApiError as exc:
                log.warning("openpai: cannot stop job %s yet (retried): %s", trial.handle["job"], exc)
            else:
                self._stops.pop(trial.trial_id, None)

    async def _read_file(self, handle: OpenpaiHandle, name: str) -> bytes:
        try:
            return await self.trials.read(handle["trial_dir"], name)
        except FileNotFoundError:
            if name != JOB_LOG:
                raise
        return (await cluster.job_log(self.client, handle["job"], self.template.primary)).encode()

    async def _keep_job_log(self, trial: LiveTrial) -> None:
        """A trial that ended without result.json: keep what OpenPAI's log manager has of its first task."""
        try:
            text = await cluster.job_log(self.client, trial.handle["job"], self.template.primary)
            path = Path(trial.handle["trial_dir"]) / JOB_LOG
            await asyncio.to_thread(path.write_text, text, encoding="utf-8")
        except (PlatformError, OSError) as exc:
            log.info("openpai: cannot keep the log of job %s: %s", trial.handle["job"], exc)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials and self.live:
            await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
        if killed_trials and self.fleet is not None:
            await self.fleet.close()
        await self.client.close()
        if self._delivery is not None:
            await self._delivery.close()

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        """The cancelled trials whose keeper recorded its end or whose job ended; STOPs not taken are resent."""
        await self._send_stops(trials)
        self.watcher.hurry()
        await self.watcher.refresh()
        ended = await self.trials.ended(trials)
        for trial in trials:
            job = self.watcher.jobs.get(trial.handle["job"])
            if (job is not None and job.ended) or self.watcher.gone(trial.handle["job"]):
                ended.add(trial.trial_id)
        return ended


def _result_decides(trial: LiveTrial, look: TrialLook) -> bool:
    """The trial's end is decided by its result.json alone: its job (not a worker's, which runs on) need not be
    asked about."""
    if look.result is None or trial.handle.get("tasks", 1) != 1 or runs_in_worker(trial.handle):
        return False
    return not look.result.get("canceled") or trial.cancel_status is not None


__all__ = ["OpenpaiTrainingService"]
