"""Reuse mode on Kubeflow and FrameworkController: worker jobs that run trial after trial (:mod:`..batch.reuse`).

A worker is one custom resource of the platform's kind (a TFJob or PyTorchJob of one replica, a Framework of one
task) named like NNI's environments (``nni-exp-<exp>-env-<worker>``, FrameworkController's without hyphens),
whose single container runs ``worker.py`` from the storage instead of the entry point. The manager hands it trials
through its directory on the storage (:class:`~..batch.reuse.WorkerFleet`), so each trial keeps the keeper's
guarantees. What the fleet needs of the platform's jobs comes from the service's informers, in memory: the
worker's resource state, and its pods, whose failure (an eviction, a lost node, an OOM kill, an image that cannot
be pulled) ends the worker as the platform's doing, so its trials fail as infrastructure failures and are retried
in another worker. Nothing here is asked of the API server but a resource the informer has not seen yet.

A job of several pods (several roles, replicas or tasks) is not reused (:meth:`ReusableKubernetesService.reuse_refusal`,
which the log quotes): its pods find one another per job (``TF_CONFIG``, ``MASTER_ADDR``, FrameworkController's barrier) and run one
distributed trial together; a worker running trial after trial in one pod cannot give each trial that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.base import LiveTrial
from trialfleet.training_services.batch.outcome import RESULT_GRACE, JobRecord, JobView
from trialfleet.training_services.batch.reuse import (
    REUSE_POLL_INTERVAL,
    ReusePolicy,
    WorkerFleet,
    WorkerOutcomes,
    runs_in_worker,
    worker_argv,
)
from trialfleet.training_services.batch.watcher import JobWatcher
from trialfleet.training_services.batch.workers import REGISTRY
from trialfleet.training_services.environment import nni_variables
from trialfleet.training_services.events import PollBatch, TrialStarted
from trialfleet.training_services.job_states import StateMeaning
from trialfleet.training_services.kubernetes.cluster import (
    KC,
    SHUTDOWN_WAIT,
    KubernetesTrainingService,
    TrialJob,
)
from trialfleet.training_services.kubernetes.config import K8sReuseConfig
from trialfleet.training_services.kubernetes.names import (
    WORKER_DIR_ANNOTATION,
    WORKER_LABEL,
    resource_name,
    worker_labels,
)
from trialfleet.training_services.kubernetes.pods import WorkerCommand
from trialfleet.training_services.kubernetes.states import pod_problem
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_dir import command_record, input_files
from trialfleet.training_services.trial_files import TrialLook

log = logging.getLogger(__name__)

SYNC_WAIT = 10.0  # seconds a look waits for the informers' first list
#: how often a service with workers looks at its trials (half the batch platforms' REUSE_POLL_INTERVAL): a look is a
#: few stat calls per live trial on the storage, the workers' state being in memory; the end of a trial seen sooner
#: is the next trial given sooner (bench.cluster_reuse: 0.31 s of overhead per trial after the first at 0.2 s on
#: Kubeflow, about 0 at 0.1 s, on a loaded 2-core machine)
WORKER_POLL_INTERVAL = REUSE_POLL_INTERVAL / 2


@dataclass(frozen=True)
class WorkerResource(JobRecord):
    """A worker's resource at one look: what its operator and its pods say (a :class:`~..batch.outcome.BatchJob`)."""

    name: str
    state: StateMeaning

    @property
    def meaning(self) -> StateMeaning:
        return self.state

    def describe(self) -> str:
        return f"{self.name}: {self.state.reason}"


class ResourceWatcher(JobWatcher[WorkerResource]):
    """The workers' resources, read from the service's informers (a look costs nothing: looked at often)."""

    MIN_INTERVAL, MAX_INTERVAL = 0.1, 1.0

    def __init__(self, service: ReusableKubernetesService) -> None:
        super().__init__()
        self.service = service
        self.platform = service.platform

    async def query(self, job_ids: list[str]) -> Mapping[str, WorkerResource]:
        jobs, pods = self.service.jobs, self.service.pods
        assert jobs is not None and pods is not None
        if not await asyncio.to_thread(jobs.synced.wait, SYNC_WAIT):
            raise PlatformError(f"{self.platform}: no list of {jobs.what} yet ({jobs.problem or 'waiting'})")
        known, found = jobs.snapshot(), {}
        by_worker = _pods_by_worker({**pods.deleted(), **pods.snapshot()})
        for name in job_ids:
            obj = known.get(name) or await self.service.client.get(self.service.kind, name)
            if obj is not None:
                found[name] = self._record(name, obj, by_worker.get(_worker_of(obj), []))
        return found

    def _record(self, name: str, obj: Mapping[str, Any], pods: list[dict[str, Any]]) -> WorkerResource:
        state = self.service.job_state(obj)
        meaning = StateMeaning(state.status, state.failure_kind, state.reason)
        if not state.ended:
            problem = next(filter(None, (pod_problem(pod) for pod in pods)), None)
            if problem is not None:  # the platform's doing: the worker is lost, its trials retried elsewhere
                meaning = StateMeaning(TrialStatus.FAILED, FailureKind.INFRASTRUCTURE, problem)
        return WorkerResource(name, meaning)


def _worker_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata", {}).get("labels") or {}).get(WORKER_LABEL, ""))


def _pods_by_worker(pods: Mapping[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for pod in pods.values():
        worker = _worker_of(pod)
        if worker:
            grouped.setdefault(worker, []).append(pod)
    return grouped


class ReusableKubernetesService(KubernetesTrainingService[KC]):
    """A Kubernetes platform with NNI's reuse mode: :class:`~..batch.reuse.WorkerJobs` for its fleet, and its worker
    trials collected beside the trials that have a resource of their own."""

    fleet: WorkerFleet | None = None
    watcher: ResourceWatcher | None = None

    def reuse_refusal(self) -> str | None:
        """Why this config's job cannot be a worker (NNI's words for the shape), or None."""
        return None

    def worker_gpus(self) -> int | None:
        """GPUs of a worker's pod, which its trials share (``maxTrialNumberPerGpu`` each)."""
        return None

    async def _prepare(self) -> None:
        await super()._prepare()
        config = self.cluster
        if not isinstance(config, K8sReuseConfig) or not config.reuse_mode:
            return
        refusal = self.reuse_refusal()
        if refusal is not None:
            log.warning(
                "%s: reuseMode is not acted on for %s: a worker runs its trials in one pod, while the pods of a "
                "distributed job find one another once per job; every trial attempt is a resource of its own",
                self.platform,
                refusal,
            )
            return
        idle = float(config.worker_idle_timeout)
        if config.max_trial_number_per_gpu != 1 and not self.worker_gpus():
            log.warning(
                "%s: maxTrialNumberPerGpu is not acted on: the role asks for no GPU (gpuNumber), so a worker runs "
                "one trial at a time",
                self.platform,
            )
        self.reuse_policy = ReusePolicy.of(self.worker_gpus(), config.max_trial_number_per_gpu, idle)
        self.watcher = ResourceWatcher(self)
        storage = self.storage
        self.fleet = WorkerFleet(
            self,
            storage.trials,
            storage.remote,
            self.watcher,
            self.reuse_policy,
            job_key="name",
            registry=self.context.experiment_dir / REGISTRY,
        )
        self.poll_interval = WORKER_POLL_INTERVAL

    # ---- the fleet's WorkerJobs --------------------------------------------------------------------------

    async def start_worker(self, name: str, worker_dir: str) -> str:
        experiment = self.context.experiment_id
        resource = resource_name(
            experiment, name, 0, compact=self.compact_names, room=self.name_room(), kind="env"
        )
        layout = self.storage.layout
        argv = worker_argv(layout.worker, worker_dir, f"{self.storage.remote}/trials", self.reuse_policy)
        spec_storage = self.storage_spec()
        job = TrialJob(
            resource,
            worker_labels(experiment, name),
            {WORKER_DIR_ANNOTATION: worker_dir},
            {"NNI_PLATFORM": self.platform, "NNI_EXP_ID": experiment},
            WorkerCommand(layout.shim_dir, tuple(argv)),
            spec_storage.volume,
            spec_storage.container_path,
            None,
        )
        await self.client.create(self.kind, self.manifest(job))
        return resource

    async def end_worker(self, job_id: str) -> None:
        try:
            await self.client.delete(self.kind, job_id)
        except PlatformError as exc:
            log.warning("%s: cannot delete worker %s yet (retried): %s", self.platform, job_id, exc)

    # ---- trials in workers -------------------------------------------------------------------------------

    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred:
        if self.fleet is None:
            return await super()._launch(spec)
        trial_dir = self.storage.trial_dir(attempt_name(spec.trial_id, spec.attempt))
        try:
            code_dir = await self.storage.code_dir(spec.code_dir)
            env = nni_variables(
                self.platform, self.context.experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir
            )
            env.update(spec.env)
            command = command_record(
                ["/bin/bash", "-c", next(iter(self.role_commands(spec).values()))], code_dir, env
            )
            extra = {
                "namespace": self.cluster.namespace,
                "attempt": spec.attempt,
                "trial_dir_here": str(self.storage.to_local(trial_dir)),
            }
            submitted = await self.fleet.launch(
                spec, trial_dir, input_files(spec.parameter_record, command), extra
            )
        except PlatformError as exc:
            return self._deferred(exc)
        self.wakeup.set()
        return submitted

    async def _adopt(self, trial: LiveTrial) -> None:
        if runs_in_worker(trial.handle) and self.fleet is not None and self.watcher is not None:
            self.watcher.watch(str(trial.handle["name"]))
            self.fleet.adopt(trial)
        await super()._adopt(trial)

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        if self.fleet is None or self.watcher is None:
            return await super()._collect(trials)
        await self.watcher.refresh()
        await self.fleet.maintain()
        own = [trial for trial in trials if not runs_in_worker(trial.handle)]
        batch = await super()._collect(own) if own else PollBatch()
        in_workers = [trial for trial in trials if runs_in_worker(trial.handle)]
        looks = await self.storage.trials.look(in_workers)
        for trial in in_workers:
            batch.extend(await self._collect_in_worker(trial, looks[trial.trial_id]))
        return batch

    async def _collect_in_worker(self, trial: LiveTrial, look: TrialLook) -> PollBatch:
        assert self.fleet is not None and self.watcher is not None
        job_id = str(trial.handle["name"])
        job = self.watcher.jobs.get(job_id)
        keeper_started = bool(trial.state.get("keeper_started") or look.keeper_started)
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        if not trial.started and keeper_started:  # the worker's job runs before it takes the trial
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = trial.waiting_changed(job.meaning.reason if job is not None and job.waiting else None)
        since = self.watcher.ended_for(job_id)
        settled = since is not None and since >= RESULT_GRACE
        view: JobView[Any] = JobView(
            look.result, job, keeper_started, trial.cancel_status, self.watcher.gone(job_id), settled
        )
        ended = WorkerOutcomes(self.platform).outcome(trial.trial_id, view)
        if ended is None and (look.result is not None or trial.cancel_status is not None):
            self.watcher.hurry()
        if look.more:
            ended = None  # metrics are still to be read: the end comes after them
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
            await self.fleet.trial_ended(trial, ended)
        return batch

    async def _kill(self, trial: LiveTrial) -> None:
        if self.fleet is not None and runs_in_worker(trial.handle):
            await self.fleet.cancel(trial)  # the worker signals the keeper, which ends the trial's tree
            return
        await super()._kill(trial)

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials and self.fleet is not None:
            await self._wait_for_trials_to_end(self._ended_in_workers, SHUTDOWN_WAIT, interval=0.2)
            await self.fleet.close()
        await super()._shutdown(killed_trials)

    async def _ended_in_workers(self, trials: list[LiveTrial]) -> set[str]:
        """Trials with a resource of their own, once it is gone; a worker's, once its keeper recorded the end."""
        own = [trial for trial in trials if not runs_in_worker(trial.handle)]
        in_workers = [trial for trial in trials if runs_in_worker(trial.handle)]
        return await self._resources_gone(own) | await self.storage.trials.ended(in_workers)
