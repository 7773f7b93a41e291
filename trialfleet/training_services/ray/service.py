"""Ray training service: every trial attempt is one Ray job, submitted through the Jobs API of the user's cluster.

The job runs ``entry.py`` in the uploaded code (:mod:`.package`), which runs the trial keeper on the node Ray
chose and writes the trial directory into the job's log (:mod:`.entry`). The manager follows each live job's log
(a WebSocket) into a mirror of the trial directory below the experiment directory (:mod:`.log_channel`) and
reads that mirror as a local trial directory: metrics exactly once and in order, logs while running and after,
all without a file system shared with the cluster. Ray's own view of the jobs — placement, waiting reasons,
failures the keeper cannot report — comes from one ``list_jobs`` per due poll (:class:`~.status.JobWatcher`).

The handle is the submission id (``nni_exp_<exp>_trial_<trial>_attempt_<n>``, which Ray never accepts twice)
and the mirror's path, so a restarted manager re-adopts its jobs and replays their logs from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from pathlib import Path

from trialfleet.errors import PlatformError
from trialfleet.extras import install_hint
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.batch.outcome import JobView
from trialfleet.training_services.batch.service import BatchJobService
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.ray.config import RayConfig
from trialfleet.training_services.ray.entry import LEFT_RECORD
from trialfleet.training_services.ray.entry import PAUSE as FORWARD_PERIOD
from trialfleet.training_services.ray.jobs import RayJobs, RequestRefused, SubmittedAlready
from trialfleet.training_services.ray.log_channel import LogMirror
from trialfleet.training_services.ray.package import build_package, shipped_paths
from trialfleet.training_services.ray.status import RAY_OUTCOMES, JobWatcher, RayHandle, RayJob, RayOutcomes
from trialfleet.training_services.ray.submission import (
    METADATA_ATTEMPT,
    METADATA_EXPERIMENT,
    METADATA_TRIAL,
    JobRequest,
    Resources,
    job_request,
    submission_id,
)
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_dir import PARAMETER_FILE
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles, TrialLook

log = logging.getLogger(__name__)

FOLLOW_RETRY = 2.0  # a log follower that broke off is started again after this long
STOP_AGAIN_AFTER = 15.0  # a stopped job still running after this long is asked to stop again
DRAIN_ATTEMPTS = 3  # reads of an ended job's whole log before its node is taken as gone with it
SHUTDOWN_WAIT = 30.0


LiveTrial = base.LiveTrial[RayHandle]


class RayTrainingService(BatchJobService[RayConfig, RayJob, RayHandle]):
    platform = "ray"
    config_class = RayConfig
    poll_interval = 1.0
    job_key = "submission_id"

    def __init__(self, context: ExperimentContext, *, jobs: RayJobs | None = None) -> None:
        super().__init__(context)
        self.jobs = jobs or RayJobs(self.config.address, self.config.http_headers())
        self.watcher = JobWatcher(self.jobs.jobs)
        self.files = LocalTrialFiles()
        self._packages: dict[Path, str] = {}
        self._package_lock = asyncio.Lock()
        self._followers: dict[str, asyncio.Task[None]] = {}

    # ---- preparation -----------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        self._check_runtime_env()
        await self.jobs.connect()
        known = await self.jobs.jobs()
        ours = {
            sid: job
            for sid, job in known.items()
            if job.metadata.get(METADATA_EXPERIMENT) == self.context.experiment_id
        }
        self.watcher.seed(ours)  # trials adopted next start from what Ray says of their jobs
        live = sum(not job.ended for job in ours.values())
        log.info(
            "ray: connected to %s; %d job(s) of this experiment there, %d live",
            self.config.address,
            len(ours),
            live,
        )

    def _check_runtime_env(self) -> None:
        if not self.config.runtime_env:
            return
        try:
            from ray.runtime_env import RuntimeEnv

            RuntimeEnv(**self.config.runtime_env)
        except ImportError as exc:
            raise PlatformError(
                f"ray: the Ray client is not installed ({exc}); {install_hint('ray')}"
            ) from exc
        except Exception as exc:  # Ray's own validation: ValueError, TypeError …
            raise PlatformError(f"ray: runtimeEnv is refused by Ray: {exc}") from exc

    # ---- submission ------------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted[RayHandle] | Deferred:
        try:
            sid = submission_id(self.context.experiment_id, spec)
        except ValueError as exc:
            raise PlatformError(f"ray: {exc}") from exc
        mirror = self.context.trials_dir / attempt_name(spec.trial_id, spec.attempt)
        request = await self._request(spec)
        await self.files.write(str(mirror), {PARAMETER_FILE: spec.parameter_record})
        try:
            await self.jobs.submit(request)
        except SubmittedAlready:
            await self._check_ours(request)
            log.info("ray: trial %s already has job %s; adopting it", spec.trial_id, sid)
        except RequestRefused:
            raise  # the trial fails with Ray's reason
        except (
            PlatformError
        ) as exc:  # the head is down or busy; a submit that did get through is found next time
            return Deferred(f"cannot submit to the Ray cluster: {exc}")
        self.watcher.watch(sid)
        return Submitted({"submission_id": sid, "trial_dir": str(mirror)}, f"ray:{sid}", started=False)

    async def _request(self, spec: TrialSpec) -> JobRequest:
        config = self.config
        resources = Resources(
            cpus=config.trial_cpu_number,
            gpus=spec.gpu_number or None,
            memory_mb=config.trial_memory_size,
            custom=config.trial_resources,
        )
        return job_request(
            self.context.experiment_id,
            spec,
            working_dir=await self._package(spec.code_dir),
            paths=shipped_paths(),
            resources=resources,
            runtime_env=config.runtime_env,
            node_directory=config.node_directory,
        )

    async def _package(self, code_dir: Path) -> str:
        """The zip of ``code_dir``, built once per manager (the client uploads it when the cluster lacks it)."""
        async with self._package_lock:
            if code_dir not in self._packages:
                target = (
                    self.context.experiment_dir / "ray" / f"code-{code_copy_name(code_dir.resolve())}.zip"
                )
                self._packages[code_dir] = str(await asyncio.to_thread(build_package, code_dir, target))
            return self._packages[code_dir]

    async def _check_ours(self, request: JobRequest) -> None:
        job = await self.jobs.job(request.submission_id)
        mine = {key: request.metadata[key] for key in (METADATA_EXPERIMENT, METADATA_TRIAL, METADATA_ATTEMPT)}
        if job is None or {key: job.metadata.get(key) for key in mine} != mine:
            raise PlatformError(
                f"ray: the cluster has a job {request.submission_id} that this experiment did not submit"
            )

    # ---- polling ---------------------------------------------------------------------------------------

    @property
    def job_watcher(self) -> JobWatcher:
        return self.watcher

    def _outcomes(self, trial: LiveTrial) -> RayOutcomes:
        return RAY_OUTCOMES

    @property
    def trial_files(self) -> TrialFiles:
        return self.files

    async def _look(self, trials: list[LiveTrial]) -> dict[str, TrialLook]:
        """The mirrors, once each job's log is followed (or, for an ended job, read to its end)."""
        await self.watcher.refresh()
        looks = {}
        for trial in trials:
            sid = trial.handle["submission_id"]
            job = self.watcher.jobs.get(sid)
            if job is not None and job.ended:
                await self._drain(trial)
            elif job is not None and job.placed and not self.watcher.gone(sid):
                self._follow(trial)
            looks[trial.trial_id] = self.files.look_one(trial)
        return looks

    def _view(
        self, trial: LiveTrial, look: TrialLook, job: RayJob | None, keeper_started: bool
    ) -> JobView[RayJob]:
        view = super()._view(trial, look, job, keeper_started)
        return dataclasses.replace(view, settled=bool(trial.state.get("drained")))  # the log read to its end

    def _waiting_reason(self, job: RayJob) -> str | None:
        """Why Ray keeps the job PENDING (no node has the resources, the runtime env is being set up)."""
        return f"Ray: {job.message or 'the job is pending'}" if job.status == "PENDING" else None

    async def _still_ending(self, trial: LiveTrial, job: RayJob | None) -> None:
        if trial.cancel_status is not None:
            await self._stop_again(trial, job)

    async def _trial_ended(self, trial: LiveTrial, ended: TrialEnded, view: JobView[RayJob]) -> None:
        self._unfollow(trial.handle["submission_id"])

    # ---- the job's log -----------------------------------------------------------------------------------

    def _mirror(self, trial: LiveTrial) -> LogMirror:
        mirror: LogMirror = trial.state.setdefault("mirror", LogMirror(Path(trial.handle["trial_dir"])))
        return mirror

    def _follow(self, trial: LiveTrial) -> None:
        """Make sure the job's log is followed into the mirror (again, a while after a follower broke off)."""
        sid = trial.handle["submission_id"]
        task = self._followers.get(sid)
        if task is not None and not task.done():
            return
        if time.monotonic() - trial.state.get("follow_ended", -FOLLOW_RETRY) < FOLLOW_RETRY:
            return
        self._followers[sid] = asyncio.create_task(self._follow_log(trial, self._mirror(trial)))

    async def _follow_log(self, trial: LiveTrial, mirror: LogMirror) -> None:
        sid = trial.handle["submission_id"]
        mirror.restart()
        try:
            async for chunk in self.jobs.follow(sid):
                mirror.feed(chunk)
                self.wakeup.set()
        except PlatformError as exc:
            log.debug("ray: following the log of %s broke off (followed again): %s", sid, exc)
        finally:
            trial.state["follow_ended"] = time.monotonic()

    def _unfollow(self, sid: str) -> None:
        task = self._followers.pop(sid, None)
        if task is not None:
            task.cancel()

    async def _drain(self, trial: LiveTrial) -> None:
        """Read an ended job's whole log once: whatever its follower missed reaches the mirror."""
        if trial.state.get("drained"):
            return
        sid = trial.handle["submission_id"]
        self._unfollow(sid)
        try:
            self._mirror(trial).replay(await self.jobs.logs(sid))
        except PlatformError as exc:
            attempts = trial.state["drain_attempts"] = trial.state.get("drain_attempts", 0) + 1
            if attempts < DRAIN_ATTEMPTS:
                return
            log.warning("ray: the log of ended job %s cannot be read (%s); going by Ray's state", sid, exc)
        trial.state["drained"] = True

    # ---- cancel, files, shutdown -----------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        """Ray's stop: SIGTERM to the entrypoint and every process below it (the keeper ends the tree and records
        it), SIGKILL after RAY_JOB_STOP_WAIT_TIME_S. A stop that cannot be sent is sent again by later polls."""
        trial.state["stop_sent"] = time.monotonic()
        self.watcher.hurry()
        sid = trial.handle["submission_id"]
        try:
            await self.jobs.stop(sid)
        except PlatformError as exc:
            log.warning("ray: cannot stop job %s yet (retried): %s", sid, exc)
            trial.state["stop_sent"] = None

    async def _stop_again(self, trial: LiveTrial, job: RayJob | None) -> None:
        sent = trial.state.get("stop_sent")
        if sent is None or (job is not None and not job.ended and time.monotonic() - sent > STOP_AGAIN_AFTER):
            await self._kill(trial)

    async def _read_file(self, handle: RayHandle, name: str) -> bytes:
        await self._catch_up(handle)
        try:
            return await self.files.read(handle["trial_dir"], name)
        except FileNotFoundError:
            left = _left_on_node(Path(handle["trial_dir"]), name)
            if left is None:
                raise
            raise FileNotFoundError(left) from None

    def trial_dir_here(self, handle: RayHandle) -> Path | None:
        """An ended trial's mirror, which is complete, is streamed from disk. A running trial's file is read
        with :meth:`_read_file` (the mirror caught up with the job's log first), as is any file of a trial
        that left files on its node (asking for one of those then says where it is)."""
        mirror = self.files.here(handle["trial_dir"])
        if self._is_live(handle["submission_id"]) or (mirror / LEFT_RECORD).exists():
            return None
        return mirror

    def _is_live(self, submission_id: str) -> bool:
        return any(trial.handle["submission_id"] == submission_id for trial in self.live.values())

    async def _catch_up(self, handle: RayHandle) -> None:
        """For a running trial, bring the mirror up to what the trial wrote before now: wait for entry.py to
        forward it (every PAUSE) and read the job's whole log, rather than wait for its follower."""
        sid = handle["submission_id"]
        if not self._is_live(sid):
            return  # an ended trial's mirror is complete
        await asyncio.sleep(2 * FORWARD_PERIOD)
        try:
            LogMirror(Path(handle["trial_dir"])).replay(await self.jobs.logs(sid))
        except PlatformError as exc:
            log.debug("ray: reading the log of %s failed; the mirror is read as it is: %s", sid, exc)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_trials_to_end(self._jobs_ended, SHUTDOWN_WAIT, interval=0.5)
        for sid in list(self._followers):
            self._unfollow(sid)

    async def _jobs_ended(self, trials: list[LiveTrial]) -> set[str]:
        """The cancelled trials whose jobs are over, or were never placed (Ray stops those once placed)."""
        try:
            jobs = await self.jobs.jobs()
        except PlatformError as exc:
            log.warning("ray: cannot confirm that the stopped jobs ended: %s", exc)
            return set()
        ended = set()
        for trial in trials:
            job = jobs.get(trial.handle["submission_id"])
            if job is None or job.ended or not job.placed:
                ended.add(trial.trial_id)
            else:
                await self._stop_again(trial, job)
        return ended


def _left_on_node(trial_dir: Path, name: str) -> str | None:
    """Why a file the trial wrote is not in the mirror: it was over the budget shipped through the log."""
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((trial_dir / LEFT_RECORD).read_text())
        for item in info["files"]:
            if item["file"] == name:
                return (
                    f"{name} ({item['size']} bytes) is too big to come through the job's log; it stays on "
                    f"{info['host']} in {info['trial_dir']}"
                )
    return None
