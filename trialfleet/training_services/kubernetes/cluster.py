"""What the Kubernetes platforms share: one custom resource per trial attempt, trial directories on a storage.

A platform (Kubeflow, FrameworkController, AdaptDL) says which kind it submits, builds its manifest and reads
its operator's status; this class does the rest:

* ``start``: reach the API server, check that it serves the kind (a 404 names the operator to install), that
  the namespace exists and that the storage is mounted here and writable; install the support bundle, the
  containers' entry point and the code on the storage once.
* ``submit``: the trial directory (parameters, each role's command), then the resource, named after the
  attempt (:mod:`.names`). A resource already there under that name with this attempt's labels — a manager
  killed after the create — is adopted, as is an attempt whose keeper left ``launch.json``.
* ``poll``: two informers (:mod:`.informer`) keep the experiment's resources and pods in memory, from a list
  and a watch; each poll reads the trial directories (metrics, exactly once through the cursors) and decides
  with :func:`.outcome.trial_outcome`. A pod the platform failed (image pull, OOM kill, eviction, lost node)
  ends the trial as an infrastructure failure, and its resource is deleted.
* ``cancel``: delete the resource, dependents first (foreground); the end is reported once it is gone.
* ``adopt``: the handle names the resource (name, uid) and the trial directory; nothing else is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.status import TrialStatus
from trialfleet.training_services import base
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.environment import nni_variables
from trialfleet.training_services.events import PollBatch, TrialStarted, TrialWaiting
from trialfleet.training_services.kubernetes.client import KubeApiError, KubeClient, ResourceKind
from trialfleet.training_services.kubernetes.config import (
    AdlConfig,
    FrameworkControllerConfig,
    KubeflowConfig,
)
from trialfleet.training_services.kubernetes.informer import Informer
from trialfleet.training_services.kubernetes.mounting import LocalMount, mount_storage, unmount
from trialfleet.training_services.kubernetes.names import (
    ATTEMPT_LABEL,
    experiment_selector,
    resource_name,
    same_attempt,
    trial_annotations,
    trial_labels,
)
from trialfleet.training_services.kubernetes.outcome import TrialView, trial_outcome
from trialfleet.training_services.kubernetes.pods import ContainerCommand, Entrypoint
from trialfleet.training_services.kubernetes.states import JobState, pod_problem, pod_waiting_reason
from trialfleet.training_services.kubernetes.storage import (
    StorageSpec,
    experiment_storage,
    install_entrypoint,
)
from trialfleet.training_services.mounted_storage import MountedStorage
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec
from trialfleet.training_services.trial_dir import LAUNCH_RECORD, command_record, input_files
from trialfleet.training_services.trial_files import TrialLook

log = logging.getLogger(__name__)

KubernetesConfig = KubeflowConfig | FrameworkControllerConfig | AdlConfig
RESULT_GRACE = 3.0  # a job ended without result.json visible yet: the storage may cache file attributes …
RESULT_GRACE_AFTER_SUCCESS = 60.0  # … and when the job succeeded, the keeper wrote it: wait longer
PRIMARY_GRACE = 60.0  # the primary replica ended, the job still runs others: then the trial ends anyway
CANCEL_RESEND = 15.0  # a cancelled resource still there is deleted again
CANCEL_OVERDUE = 60.0  # … and its end reported from its record, if any, after this long
SHUTDOWN_WAIT = 60.0


@dataclass(frozen=True)
class TrialJob:
    """One trial attempt, as the platform's manifest needs it."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    variables: dict[str, str]  # NNI's and the spec's, for every replica
    entrypoint: ContainerCommand
    volume: dict[str, Any]
    mount_path: str
    gpu_number: int | None  # the spec's (AdaptDL: GPUs per replica)


class KubernetesHandle(TypedDict):
    name: str  # the resource's
    uid: str | None
    namespace: str
    attempt: int
    trial_dir: str  # on the cluster's storage
    trial_dir_here: str  # where this machine sees it (read by nni_view)


KC = TypeVar("KC", bound=KubernetesConfig)
LiveTrial = base.LiveTrial[KubernetesHandle]


class KubernetesTrainingService(TrainingService[KC, KubernetesHandle], Generic[KC]):
    poll_interval = 1.0
    #: its operator restarts replicas it signalled (AdaptDL rescales), so the entry point lets them run again
    restartable: ClassVar[bool] = False
    #: its operator gets over evictions and lost nodes by itself (AdaptDL restarts elsewhere)
    tolerates_disruptions: ClassVar[bool] = False
    #: FrameworkController's names take no hyphen
    compact_names: ClassVar[bool] = False

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        self.cluster = self.config
        self.client = KubeClient(self.platform, self.cluster, self.cluster.namespace)
        self.kind = self.resource_kind()
        self._storage: MountedStorage | None = None
        self._mount: LocalMount | None = None
        self.entrypoint_script = ""
        self.jobs: Informer | None = None
        self.pods: Informer | None = None
        self._gone: set[str] = set()
        self.pull_secrets: dict[str, tuple[str, ...]] = {}  # role → image pull secrets

    # ---- what a platform provides ------------------------------------------------------------------

    @abstractmethod
    def resource_kind(self) -> ResourceKind: ...

    @abstractmethod
    def storage_spec(self) -> StorageSpec: ...

    @abstractmethod
    def role_commands(self, spec: TrialSpec) -> dict[str, str]:
        """Each role's command, the primary role's first (its index 0 is the trial's replica)."""

    @abstractmethod
    def manifest(self, job: TrialJob) -> dict[str, Any]: ...

    @abstractmethod
    def job_state(self, obj: Mapping[str, Any]) -> JobState: ...

    async def _prepare_platform(self) -> None:
        """Secrets and the like, once the API server and the storage are known to work."""

    async def _after_create(self, created: Mapping[str, Any], job: TrialJob) -> None:
        """Objects the resource owns that need its uid (AdaptDL's checkpoint claim)."""

    def fallback_kind(self) -> ResourceKind | None:
        """A version to use when the configured one is not served (Kubeflow: v1)."""
        return None

    def name_room(self) -> int:
        """Characters the operator appends to the resource's name in names capped at 63 (:mod:`.names`)."""
        return 0

    # ---- preparation ---------------------------------------------------------------------------------

    @property
    def storage(self) -> MountedStorage:
        assert self._storage is not None, "the service was not started"
        return self._storage

    async def _prepare(self) -> None:
        try:
            experiment_selector(self.context.experiment_id)
        except ValueError as exc:  # an id from elsewhere (resume --experiment_dir): trialfleet's ids fit
            raise PlatformError(
                f"{self.platform}: {exc}: it labels every resource of the experiment (expId), so it must be at "
                "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            ) from exc
        await asyncio.to_thread(self.client.connect)
        try:
            await self._check_kind()
            await self.client.check_namespace()
            spec = self.storage_spec()
            self._mount = await mount_storage(self.platform, spec, self.context.experiment_dir)
            self._storage = experiment_storage(self._mount.point, spec, self.context.experiment_id)
            await self.storage.prepare()
            self.entrypoint_script = await asyncio.to_thread(install_entrypoint, self.storage)
            await self._prepare_platform()
        except BaseException:
            self.client.close()
            if self._mount is not None:
                await unmount(self.platform, self._mount)
            raise
        self._start_informers()

    async def _check_kind(self) -> None:
        if await self.client.served(self.kind):
            return
        fallback = self.fallback_kind()
        if fallback is not None and await self.client.served(fallback):
            log.warning(
                "%s: %s does not serve %s at version %s; using %s, the version it serves",
                self.platform,
                self.client.description,
                self.kind.resource,
                self.kind.version,
                fallback.version,
            )
            self.kind = fallback
            return
        raise PlatformError(
            f"{self.platform}: {self.client.description} has no {self.kind.kind} resources "
            f"({self.kind.group}/{self.kind.version} {self.kind.plural}: 404): install {self.kind.operator}"
        )

    def _start_informers(self) -> None:
        loop = asyncio.get_running_loop()

        def changed() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self.wakeup.set)

        selector = experiment_selector(self.context.experiment_id)
        kind, namespace = self.kind, self.cluster.namespace
        custom = functools.partial(
            self.client.custom.list_namespaced_custom_object, kind.group, kind.version, namespace, kind.plural
        )
        pods = functools.partial(self.client.core.list_namespaced_pod, namespace)
        self.jobs = Informer(
            self.client, f"{kind.resource} in namespace {namespace}", custom, selector, changed
        )
        self.pods = Informer(self.client, f"pods in namespace {namespace}", pods, selector, changed)
        self.jobs.start()
        self.pods.start()

    # ---- submission ----------------------------------------------------------------------------------

    def _name(self, spec: TrialSpec) -> str:
        return resource_name(
            self.context.experiment_id,
            spec.trial_id,
            spec.attempt,
            compact=self.compact_names,
            room=self.name_room(),
        )

    async def _launch(self, spec: TrialSpec) -> Submitted[KubernetesHandle] | Deferred:
        name = self._name(spec)
        trial_dir = self.storage.trial_dir(attempt_name(spec.trial_id, spec.attempt))
        try:
            labels = trial_labels(self.context.experiment_id, spec.trial_id, spec.attempt)
            found = await self.client.get(self.kind, name)
        except ValueError as exc:
            raise PlatformError(f"{self.platform}: {exc}") from exc
        except PlatformError as exc:
            return self._deferred(exc)
        if found is not None:
            return self._earlier(spec, found, trial_dir)
        if await self.storage.trials.exists(trial_dir, LAUNCH_RECORD):
            log.info(
                "%s: trial %s ran already and its resource is gone; adopting it", self.platform, spec.trial_id
            )
            return self._submitted(spec, name, None, trial_dir)
        code_dir = await self.storage.code_dir(spec.code_dir)
        await self.storage.trials.write(trial_dir, self._trial_files(spec, code_dir))
        job = self._trial_job(spec, name, labels, trial_dir, code_dir)
        try:
            created = await self.client.create(self.kind, self.manifest(job))
        except KubeApiError as exc:
            if exc.status == 409:  # made meanwhile (by us, before a restart): find it
                found = await self.client.get(self.kind, name)
                if found is not None:
                    return self._earlier(spec, found, trial_dir)
            return self._deferred(exc)
        except PlatformError as exc:  # it may have been created: the next offer finds it by name
            return self._deferred(exc)
        await self._after_create(created, job)
        return self._submitted(spec, name, created["metadata"].get("uid"), trial_dir)

    def _deferred(self, exc: PlatformError) -> Deferred:
        """Transient failures (unreachable, 429, 5xx) wait for the next offer; refusals fail the trial."""
        if isinstance(exc, KubeApiError) and exc.status != 429 and exc.status < 500:
            raise exc
        return Deferred(f"waiting for {self.client.description}: {exc}")

    def _earlier(self, spec: TrialSpec, found: Mapping[str, Any], trial_dir: str) -> Submitted[KubernetesHandle]:
        meta = found["metadata"]
        if not same_attempt(meta.get("labels"), self.context.experiment_id, spec.trial_id, spec.attempt):
            raise PlatformError(
                f"{self.platform}: {self.kind.resource} {meta['name']!r} in namespace {self.cluster.namespace!r} "
                f"exists and is not trial {spec.trial_id}'s (labels {meta.get('labels')}); delete it"
            )
        log.info(
            "%s: trial %s already has %s %s; adopting it",
            self.platform,
            spec.trial_id,
            self.kind.kind,
            meta["name"],
        )
        return self._submitted(spec, meta["name"], meta.get("uid"), trial_dir)

    def _submitted(self, spec: TrialSpec, name: str, uid: str | None, trial_dir: str) -> Submitted[KubernetesHandle]:
        handle: KubernetesHandle = {
            "name": name,
            "uid": uid,
            "namespace": self.cluster.namespace,
            "attempt": spec.attempt,
            "trial_dir": trial_dir,
            # where this machine sees it: `log` and `view` read a finished experiment's files there
            "trial_dir_here": str(self.storage.to_local(trial_dir)),
        }
        location = f"{self.platform}:{self.cluster.namespace}/{name}:{self.storage.to_local(trial_dir)}"
        self.wakeup.set()
        return Submitted(handle, location, started=False)

    def _trial_files(self, spec: TrialSpec, code_dir: str) -> dict[str, str]:
        """parameter.cfg and the primary role's command.json; every role's as command.<role>.json."""
        commands = {
            role: command_record(["/bin/bash", "-c", command], code_dir, None)  # env: the container's
            for role, command in self.role_commands(spec).items()
        }
        files = input_files(spec.parameter_record, next(iter(commands.values())))
        for role, command in commands.items():
            files[f"command.{role}.json"] = json.dumps(command)
        return files

    def _trial_job(
        self, spec: TrialSpec, name: str, labels: dict[str, str], trial_dir: str, code_dir: str
    ) -> TrialJob:
        variables = nni_variables(
            self.platform, self.context.experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir
        )
        variables.update(spec.env)
        layout = self.storage.layout
        entrypoint = Entrypoint(
            "python3",
            self.entrypoint_script,
            trial_dir,
            layout.keeper,
            layout.shim_dir,
            next(iter(self.role_commands(spec))),
            self.restartable,
        )
        spec_storage = self.storage_spec()
        return TrialJob(
            name,
            labels,
            trial_annotations(self.context.experiment_id, spec.trial_id, trial_dir),
            variables,
            entrypoint,
            spec_storage.volume,
            spec_storage.container_path,
            spec.gpu_number,
        )

    # ---- polling -------------------------------------------------------------------------------------

    async def _adopt(self, trial: LiveTrial) -> None:
        try:
            trial.started = await self.storage.trials.exists(trial.handle["trial_dir"], "keeper.json")
        except PlatformError as exc:
            log.warning("%s: cannot look at trial %s yet: %s", self.platform, trial.trial_id, exc)
        self.wakeup.set()  # it may have ended while nobody watched

    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        assert self.jobs is not None and self.pods is not None
        looks = await self.storage.trials.look(trials)
        jobs, pods = self.jobs.snapshot(), self._pods_by_trial()
        batch = PollBatch()
        for trial in trials:
            job = await self._job(trial, jobs)
            trial_pods = pods.get((trial.trial_id, str(trial.handle.get("attempt", 0))), [])
            batch.extend(await self._collect_one(trial, looks[trial.trial_id], job, trial_pods))
        return batch

    def _pods_by_trial(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Pods by (trial id, attempt), live or deleted: every operator keeps the labels of the pod template."""
        assert self.pods is not None
        grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # pods already deleted count too: a node lost or an eviction shows on a pod that is then removed
        for pod in {**self.pods.deleted(), **self.pods.snapshot()}.values():
            labels = pod["metadata"].get("labels") or {}
            grouped.setdefault((labels.get("trialId", ""), labels.get(ATTEMPT_LABEL, "")), []).append(pod)
        return grouped

    async def _job(self, trial: LiveTrial, jobs: Mapping[str, dict[str, Any]]) -> dict[str, Any] | None:
        """The trial's resource: from the informer, else asked for (it may be too new for the cache); None
        once it is gone (confirmed by the API server), or while nothing can be known."""
        name, uid = trial.handle["name"], trial.handle.get("uid")
        if name in self._gone:
            return None
        found: dict[str, Any] | None = jobs.get(name)
        if found is None:
            assert self.jobs is not None
            if not self.jobs.synced.is_set():
                return None
            try:
                found = await self.client.get(self.kind, name)
            except PlatformError as exc:
                log.debug("%s: cannot read %s: %s", self.platform, name, exc)
                return None
        if found is None or (uid is not None and found["metadata"].get("uid") != uid):
            self._gone.add(name)
            return None
        return found

    async def _collect_one(
        self, trial: LiveTrial, look: TrialLook, job: dict[str, Any] | None, pods: list[dict[str, Any]]
    ) -> PollBatch:
        now = time.monotonic()
        state = self.job_state(job) if job is not None else None
        keeper_started = trial.state.get("keeper_started") or look.keeper_started
        trial.state["keeper_started"] = keeper_started
        batch = PollBatch()
        if not trial.started and (
            keeper_started or (state is not None and state.status is TrialStatus.RUNNING)
        ):
            batch.started.append(TrialStarted(trial.trial_id, time.time()))
        batch.waiting = self._waiting(trial, pods)
        problem = None if look.result is not None else self._problem(pods)
        view = TrialView(
            look.result,
            state,
            gone=trial.handle["name"] in self._gone,
            problem=problem,
            keeper_started=bool(keeper_started),
            cancel_status=trial.cancel_status,
            cancel_overdue=self._since(trial, "cancel_sent", now) >= CANCEL_OVERDUE,
            settled=self._settled(trial, state, keeper_started, now),
            primary_overdue=self._since(trial, "result_seen", now, look.result is not None) >= PRIMARY_GRACE,
        )
        ended = trial_outcome(trial.trial_id, view)
        if ended is not None and not view.gone and (problem is not None or view.primary_overdue):
            await self._delete(trial)  # nothing of it may keep running
        elif (
            ended is None
            and trial.cancel_status is not None
            and self._since(trial, "cancel_sent", now) >= CANCEL_RESEND
        ):
            await self._kill(trial)
        if look.more:
            ended = None  # metrics are still to be read: the end comes after them
        batch.metrics, batch.problems = look.read_metrics(ended is not None)
        if ended is not None:
            batch.ended.append(ended)
        return batch

    @staticmethod
    def _since(trial: LiveTrial, key: str, now: float, start: bool = False) -> float:
        """Seconds since ``trial.state[key]`` was set (set now when ``start``); -1 when it never was."""
        if start:
            trial.state.setdefault(key, now)
        return now - trial.state[key] if key in trial.state else -1.0

    def _settled(self, trial: LiveTrial, state: JobState | None, keeper_started: bool, now: float) -> bool:
        ended_for = self._since(trial, "job_ended", now, state is not None and state.ended)
        grace = RESULT_GRACE
        if keeper_started and state is not None and state.status is TrialStatus.SUCCEEDED:
            grace = RESULT_GRACE_AFTER_SUCCESS
        return ended_for >= grace

    def _problem(self, pods: list[dict[str, Any]]) -> str | None:
        for pod in pods:
            problem = pod_problem(pod, disruptions=not self.tolerates_disruptions)
            if problem is not None:
                return problem
        return None

    @staticmethod
    def _waiting(trial: LiveTrial, pods: list[dict[str, Any]]) -> list[TrialWaiting]:
        """Why the scheduler cannot place the trial's pods, reported once per change."""
        reason = None if trial.started else next(filter(None, map(pod_waiting_reason, pods)), None)
        return trial.waiting_changed(reason)

    # ---- cancel, files, shutdown ---------------------------------------------------------------------

    async def _kill(self, trial: LiveTrial) -> None:
        trial.state["cancel_sent"] = time.monotonic()
        await self._delete(trial)

    async def _delete(self, trial: LiveTrial) -> None:
        try:
            if not await self.client.delete(self.kind, trial.handle["name"]):
                self._gone.add(trial.handle["name"])
        except PlatformError as exc:
            log.warning("%s: cannot delete %s yet (retried): %s", self.platform, trial.handle["name"], exc)
        self.wakeup.set()

    async def _read_file(self, handle: KubernetesHandle, name: str) -> bytes:
        return await self.storage.trials.read(handle["trial_dir"], name)

    def trial_dir_here(self, handle: KubernetesHandle) -> Path | None:
        return self.storage.trials.here(handle["trial_dir"])

    async def _shutdown(self, killed_trials: bool) -> None:
        if killed_trials:
            await self._wait_for_trials_to_end(self._resources_gone, SHUTDOWN_WAIT, interval=0.2)
        for informer in (self.jobs, self.pods):
            if informer is not None:
                await asyncio.to_thread(informer.stop)
        self.client.close()
        if self._mount is not None:
            await unmount(self.platform, self._mount)

    async def _resources_gone(self, trials: list[LiveTrial]) -> set[str]:
        gone = set()
        for trial in trials:
            try:
                found = await self.client.get(self.kind, trial.handle["name"])
            except PlatformError:
                continue
            if found is None or found["metadata"].get("uid") != trial.handle.get("uid"):
                gone.add(trial.trial_id)
        return gone
