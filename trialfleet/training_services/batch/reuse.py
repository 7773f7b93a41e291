"""Reuse mode (NNI's ``reuseMode``) for the batch-job platforms: long-lived worker jobs that run trial after trial.

A worker job runs ``trial_keeper/worker.py`` (its protocol is that module's docstring): the manager puts a trial in
a worker's ``inbox/`` once the trial's directory is complete, the worker takes it (once) and forks the stdlib keeper
for it, so each trial keeps the keeper's guarantees (its process tree, its files and metric channel, exactly-once
metrics, a cancel of one trial that leaves the worker running). Everything goes through the platform's
:class:`~..trial_files.TrialFiles` (a shared directory here or through a login node, a volume), so a platform
that can read trial directories can run workers.

The API, for a platform built on :class:`~.service.BatchJobService`:

* implement :class:`WorkerJobs`: ``start_worker(name, worker_dir)`` submits a job whose main process is
  ``python3 -I -S <support>/keeper/worker.py <worker_dir> <trials_dir> <idle_timeout>`` (:func:`worker_argv`) in
  the environment a trial's job would have (setup script, the ``nni`` shim), and returns its job id;
  ``end_worker(job_id)`` cancels it;
* set ``self.fleet = WorkerFleet(self, files, root, watcher, policy, job_key=self.job_key,
  registry=context.experiment_dir / REGISTRY)`` when the config asks for reuse (``root``: the experiment's
  directory on the storage as ``files`` reaches it; ``start_worker`` gets the worker's directory so, and
  translates it for the job where the job sees the storage elsewhere; ``REGISTRY`` from :mod:`.workers`);
* in ``_launch``, write nothing yourself: hand the trial's input files (``command.json`` holding the trial's own
  environment: a worker job's environment is the worker's) to :meth:`WorkerFleet.launch`;
* in ``_kill``, hand a worker's trial (:func:`runs_in_worker`) to :meth:`WorkerFleet.cancel`;
* in ``_shutdown``, once the cancelled trials ended (``close(kill_trials=True)`` only: a manager that restarts
  leaves its workers running for the next one), call :meth:`WorkerFleet.close`;
* where the workers' directories are mounted here, set ``self.poll_interval = REUSE_POLL_INTERVAL``.

:class:`~.service.BatchJobService` does the rest: adoption, releasing idle workers, deciding a trial's end
against its worker job's state (:class:`WorkerOutcomes`: a worker that dies, is preempted or cancelled fails its
trials as infrastructure failures, which ``maxTrialRetries`` re-runs, and is retired at once).

Placement: a trial goes to a worker with a free slot (running ones first), else a new worker job is submitted. A
worker has one slot without GPUs (NNI: one trial at a time per environment); with ``trialGpuNumber`` GPUs (which
is what its job asks for) it has ``maxTrialNumberPerGpu`` slots, its trials sharing its GPUs. The handle of a
worker's trial names the worker and its job (under the service's ``job_key``: the batch watcher watches the job
once, whatever the number of its trials; ``launch``'s ``extra`` adds the platform's own keys); ``assigned.json`` in the trial directory holds the same, so ``submit`` of an attempt
already given to a worker finds it again, and a restarted manager re-adopts workers from their trials' handles,
and idle ones from :data:`~.workers.REGISTRY` in its experiment directory (:class:`WorkerRegistry`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.base import LiveTrial
from trialfleet.training_services.batch.outcome import BatchJob, JobView, OutcomeTable
from trialfleet.training_services.batch.watcher import JobWatcher
from trialfleet.training_services.batch.workers import Worker, WorkerRegistry
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.spec import Submitted, TrialSpec
from trialfleet.training_services.trial_dir import ended_from_result
from trialfleet.training_services.trial_files import TrialFiles

log = logging.getLogger(__name__)

ASSIGNMENT = "assigned.json"  # in the trial directory: the worker the attempt was given to
#: a worker ends itself this much later than the manager would release it: the manager's release comes first
WORKER_IDLE_MARGIN = 30.0
#: a released worker still running after this long has its job cancelled
RELEASE_ESCALATE_AFTER = 60.0
#: at the end, how long released workers get to exit by themselves before their jobs are cancelled
CLOSE_WAIT = 10.0
#: how often a service whose workers' directories are mounted here looks at them (its ``poll_interval``): the
#: end of a trial is what lets the manager hand its worker the next one, so it is looked for more often than
#: the platform's 1 s (a look is a few stat calls per live trial); through a login node the 1 s stays
REUSE_POLL_INTERVAL = 0.1


class WorkerMailbox(Protocol):
    """How the manager's requests reach a worker: files of its directory (:class:`FilesMailbox`), or what a
    platform that shares no directory with its jobs carries them over (Azure ML: a tag of the job's run)."""

    async def give(self, worker: Worker, trial_dir: str, handle: Mapping[str, Any]) -> None:
        """Put the attempt (its directory complete, its handle recorded) in the worker's inbox; again after a
        restart too: the worker never takes an attempt twice."""

    async def cancel(self, worker: Worker, trial_dir: str) -> None:
        """Ask the worker to end that attempt."""

    async def stop(self, worker: Worker) -> None:
        """Ask the worker to take no more trials and exit once its running ones ended."""

    async def ended(self, worker: Worker) -> bool:
        """The worker recorded its own end."""


class FilesMailbox:
    """The worker's ``inbox/``, ``cancel/``, ``stop/`` and ``ended.json`` through the platform's trial files."""

    def __init__(self, files: TrialFiles) -> None:
        self.files = files

    async def give(self, worker: Worker, trial_dir: str, handle: Mapping[str, Any]) -> None:
        await self.files.write(
            posixpath.join(worker.worker_dir, "inbox"), {posixpath.basename(trial_dir): ""}
        )

    async def cancel(self, worker: Worker, trial_dir: str) -> None:
        await self.files.write(
            posixpath.join(worker.worker_dir, "cancel"), {posixpath.basename(trial_dir): ""}
        )

    async def stop(self, worker: Worker) -> None:
        await self.files.write(posixpath.join(worker.worker_dir, "stop"), {"now": ""})

    async def ended(self, worker: Worker) -> bool:
        return await self.files.exists(worker.worker_dir, "ended.json")


class WorkerJobs(Protocol):
    """What a platform does for its workers."""

    @property
    def platform(self) -> str: ...

    async def start_worker(self, name: str, worker_dir: str) -> str:
        """Submit the worker job (see the module docstring); its job id. Raises PlatformError."""

    async def end_worker(self, job_id: str) -> None:
        """Cancel the worker job (logging a failure: the fleet asks again)."""


@dataclass(frozen=True)
class ReusePolicy:
    """How many trials a worker runs at once and how long an idle one is kept (seconds)."""

    slots: int = 1
    idle_timeout: float = 60.0

    @classmethod
    def of(cls, gpu_number: int | None, max_trials_per_gpu: int, idle_timeout: float) -> ReusePolicy:
        """One slot without GPUs; ``maxTrialNumberPerGpu`` trials sharing the worker's GPUs with them."""
        return cls(max_trials_per_gpu if gpu_number else 1, idle_timeout)


def worker_argv(worker_script: str, worker_dir: str, trials_dir: str, policy: ReusePolicy) -> list[str]:
    """The worker job's main command (after the job's setup)."""
    idle = f"{policy.idle_timeout + WORKER_IDLE_MARGIN:g}"
    return ["python3", "-I", "-S", worker_script, worker_dir, trials_dir, idle]


def runs_in_worker(handle: Mapping[str, Any]) -> bool:
    return "worker" in handle


def new_worker_name() -> str:
    """Unique across managers of one experiment (a restarted manager must not reuse a name)."""
    return f"w{int(time.time() * 1000):x}{secrets.token_hex(2)}"


class WorkerFleet:
    """The live workers of one platform and the trials placed on them (see the module docstring)."""

    def __init__(
        self,
        jobs: WorkerJobs,
        files: TrialFiles,
        root: str,
        watcher: JobWatcher[Any],
        policy: ReusePolicy,
        *,
        job_key: str = "job_id",
        registry: Path | None = None,
        mailbox: WorkerMailbox | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jobs, self.files, self.watcher, self.policy = jobs, files, watcher, policy
        self.mailbox = mailbox or FilesMailbox(files)
        self.job_key = job_key  # the handle's key of the job (the service's ``job_key``)
        self.root = root
        self.trials_dir = posixpath.join(root, "trials")
        self.clock = clock
        self.workers: dict[str, Worker] = {}
        self.started_jobs = 0  # worker jobs this manager submitted (what reuse saves is read from it)
        #: the workers in use, kept on this machine for a manager that restarts (:class:`WorkerRegistry`)
        self.registry = WorkerRegistry(registry, clock) if registry is not None else None
        self._recovered = registry is None

    # ---- placement -------------------------------------------------------------------------------------------

    async def launch(
        self,
        spec: TrialSpec,
        trial_dir: str,
        files: Mapping[str, str],
        extra: Mapping[str, Any] | None = None,
    ) -> Submitted:
        """Give the trial (its input ``files``) to a worker, starting one when none has a free slot; ``extra``:
        more keys of the platform's for the handle."""
        await self._recover()
        earlier = await self._earlier(trial_dir)
        if earlier is not None:
            handle = earlier
        else:
            worker = self._free_worker() or await self._start_worker()
            handle = {self.job_key: worker.job_id, "trial_dir": trial_dir}
            handle.update(worker=worker.name, worker_dir=worker.worker_dir, **(extra or {}))
            await self.files.write(trial_dir, {**files, ASSIGNMENT: json.dumps(handle)})
        worker = self._register(handle, spec.trial_id)
        self._save()
        # again after a restart too: the worker never takes an attempt twice (claimed/)
        await self.mailbox.give(worker, trial_dir, handle)
        self.watcher.watch(worker.job_id)
        return Submitted(handle, f"{self.jobs.platform}:{worker.job_id}:{trial_dir}", started=False)

    async def _earlier(self, trial_dir: str) -> dict[str, Any] | None:
        """The handle of this attempt when an earlier call gave it to a worker already."""
        if not await self.files.exists(trial_dir, ASSIGNMENT):
            return None
        try:
            raw = await self.files.read(trial_dir, ASSIGNMENT)
        except (FileNotFoundError, ValueError):
            return None
        handle = json.loads(raw)
        return handle if isinstance(handle, dict) and runs_in_worker(handle) else None

    def _free_worker(self) -> Worker | None:
        free = [w for w in self.workers.values() if self._usable(w) and len(w.trials) < self.policy.slots]
        free.sort(key=lambda w: (not self._running(w), len(w.trials)))
        return free[0] if free else None

    def _usable(self, worker: Worker) -> bool:
        """Not released, not ended, and not idle for so long that it is released next (an earlier manager's)."""
        job = self.watcher.jobs.get(worker.job_id)
        ended = job is not None and job.ended
        idle = worker.idle_since is not None and self.clock() - worker.idle_since >= self.policy.idle_timeout
        return worker.released_at is None and not ended and not idle and not self.watcher.gone(worker.job_id)

    def _running(self, worker: Worker) -> bool:
        job = self.watcher.jobs.get(worker.job_id)
        return job is not None and job.meaning.status is TrialStatus.RUNNING

    async def _start_worker(self) -> Worker:
        name = new_worker_name()
        worker_dir = posixpath.join(self.root, "workers", name)
        job_id = await self.jobs.start_worker(name, worker_dir)
        self.started_jobs += 1
        log.info("%s: worker %s started as job %s", self.jobs.platform, name, job_id)
        worker = Worker(name, job_id, worker_dir)
        self.workers[name] = worker
        self._save()
        return worker

    async def _recover(self) -> None:
        """Once, before this manager places a trial or releases a worker: the workers an earlier manager of the
        experiment left running, idle ones included, are live again; those whose job is known to have ended (or
        which recorded their own end) are not."""
        if self._recovered or self.registry is None:
            return
        self._recovered = True
        candidates = [w for w in self.registry.load() if w.name not in self.workers]
        try:
            found = await self.watcher.query([w.job_id for w in candidates]) if candidates else {}
            ended = [await self.mailbox.ended(w) for w in candidates]
        except (OSError, PlatformError) as exc:  # not known now: those workers end themselves when idle
            log.warning("%s: cannot look at the workers of an earlier manager: %s", self.jobs.platform, exc)
            return
        for worker, ended_itself in zip(candidates, ended, strict=True):
            job = found.get(worker.job_id)
            if job is None or job.ended or ended_itself:
                continue
            self.watcher.seed({worker.job_id: job})
            self.watcher.watch(worker.job_id)
            self.workers[worker.name] = worker
            log.info("%s: worker %s (job %s) re-adopted", self.jobs.platform, worker.name, worker.job_id)
        self._save()

    def _save(self) -> None:
        if self.registry is not None:
            self.registry.save(w for w in self.workers.values() if w.released_at is None)

    def _register(self, handle: Mapping[str, Any], trial_id: str) -> Worker:
        name = str(handle["worker"])
        worker = self.workers.get(name)
        if worker is None:
            worker = Worker(name, str(handle[self.job_key]), str(handle["worker_dir"]))
            self.workers[name] = worker
        worker.trials.add(trial_id)
        worker.idle_since = None
        return worker

    # ---- for the service -------------------------------------------------------------------------------------

    def adopt(self, trial: LiveTrial) -> None:
        """A worker's trial of an earlier manager: its worker is live again for this one."""
        self._register(trial.handle, trial.trial_id)

    def holds(self, job_id: str) -> bool:
        """A worker of this fleet runs as this job (the watcher keeps watching it)."""
        return any(worker.job_id == job_id for worker in self.workers.values())

    async def cancel(self, trial: LiveTrial) -> None:
        worker = self.workers.get(str(trial.handle["worker"]))
        if worker is None:
            return
        self.watcher.hurry()
        job = self.watcher.jobs.get(worker.job_id)
        queued = job is not None and job.meaning.status is TrialStatus.WAITING and not trial.started
        if queued and worker.trials <= {trial.trial_id}:
            await self._release(worker)  # a job still queued for this trial alone: cancelled whole
            return
        trial_dir = str(trial.handle["trial_dir"])
        try:
            await self.mailbox.cancel(worker, trial_dir)
        except (OSError, PlatformError) as exc:  # the manager cancels again on its next look
            log.warning(
                "%s: cannot ask worker %s to cancel %s yet: %s",
                self.jobs.platform,
                worker.name,
                trial_dir,
                exc,
            )

    async def trial_ended(self, trial: LiveTrial, ended: TrialEnded) -> None:
        """Its slot is free; a trial lost with its worker (or its keeper) retires the worker: its retry and the
        next trials go elsewhere, even while the worker's end is not seen yet."""
        worker = self.workers.get(str(trial.handle.get("worker")))
        if worker is None:
            return
        worker.trials.discard(trial.trial_id)
        if not worker.trials:
            worker.idle_since = self.clock()
            self._save()
        if ended.failure_kind is FailureKind.INFRASTRUCTURE and worker.released_at is None:
            # a worker that ran the trial is asked to stop, never cancelled: it may run other trials to their end
            await self._release(worker, ran=bool(trial.state.get("keeper_started")))

    async def maintain(self) -> None:
        """Forget ended workers; release those idle for longer than the policy's timeout."""
        await self._recover()
        now = self.clock()
        for worker in list(self.workers.values()):
            job = self.watcher.jobs.get(worker.job_id)
            if (job is not None and job.ended) or self.watcher.gone(worker.job_id):
                if not worker.trials:
                    self.workers.pop(worker.name)
                    self.watcher.forget(worker.job_id)
                    self._save()
                continue
            if worker.released_at is not None:
                if now - worker.released_at >= RELEASE_ESCALATE_AFTER:
                    await self.jobs.end_worker(worker.job_id)
                    worker.released_at = now
            elif worker.idle_since is not None and now - worker.idle_since >= self.policy.idle_timeout:
                await self._release(worker)

    async def _release(self, worker: Worker, *, ran: bool = False) -> None:
        """The experiment no longer needs this worker: a running one (``ran``: known to have run) is asked to
        exit, a queued one cancelled."""
        log.info("%s: releasing worker %s (job %s)", self.jobs.platform, worker.name, worker.job_id)
        worker.released_at = self.clock()
        self._save()  # a restarted manager must not give a trial to a worker asked to exit
        if ran or self._running(worker):
            try:
                await self.mailbox.stop(worker)
                return
            except (OSError, PlatformError) as exc:
                log.warning("%s: cannot release worker %s: %s", self.jobs.platform, worker.name, exc)
        await self.jobs.end_worker(worker.job_id)

    async def close(self, wait: float = CLOSE_WAIT) -> None:
        """The experiment ends: every worker is released; one still running after ``wait`` seconds (it did not
        see its stop request) has its job cancelled."""
        for worker in list(self.workers.values()):
            if worker.released_at is None:
                await self._release(worker)
        deadline = self.clock() + wait
        live = {worker.job_id for worker in self.workers.values()}
        while live and self.clock() < deadline:
            await asyncio.sleep(0.2)
            try:
                found = await self.watcher.query(sorted(live))
            except PlatformError as exc:
                log.warning("%s: cannot confirm that the workers ended: %s", self.jobs.platform, exc)
                continue
            live = {job_id for job_id in live if job_id in found and not found[job_id].ended}
        for job_id in sorted(live):
            await self.jobs.end_worker(job_id)


class WorkerOutcomes(OutcomeTable[BatchJob]):
    """How a worker's trial ended: the keeper's record decides; a worker job that ends while it has the trial
    (cancelled, its node lost, its time limit) fails it as an infrastructure failure, and so does a keeper stopped
    from outside (only the worker's own end signals its keepers: a preemption, a pause). A worker started again
    (a job requeued) records the trials it had taken as lost before it takes any other."""

    log_hint = ""

    def __init__(self, describe_platform: str) -> None:
        self.gone_reason = f"the {describe_platform} worker job is gone"

    def from_result(
        self, trial_id: str, result: Mapping[str, Any], view: JobView[BatchJob]
    ) -> TrialEnded | None:
        if not result.get("canceled") or view.cancel_status is not None:
            return ended_from_result(trial_id, result, view.cancel_status)
        return self._worker_ended(trial_id, view.job, "the trial was stopped with its worker")

    def settled(self, trial_id: str, job: BatchJob, keeper_started: bool) -> TrialEnded:
        if keeper_started:
            return self._worker_ended(trial_id, job, "lost: the trial keeper left no final record")
        return self._worker_ended(trial_id, job, "the worker ended before it took the trial")

    @staticmethod
    def _worker_ended(trial_id: str, job: BatchJob | None, what: str) -> TrialEnded:
        state = f" ({job.describe()})" if job is not None else ""
        message = f"{what}: its worker job ended or stopped{state}"
        return TrialEnded(
            trial_id, TrialStatus.FAILED, time.time(), None, message, FailureKind.INFRASTRUCTURE
        )
