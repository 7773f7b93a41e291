"""The training-service seam: what every platform (local, remote, slurm, kubernetes …) implements.

Contract (every implementation passes ``tests/contract``):

* ``start()`` checks the platform and prepares it (connect, upload code). It raises
  :class:`~trialfleet.errors.PlatformError` with a per-host/per-resource explanation when it cannot.
* ``submit(spec)`` either launches the trial and returns :class:`Submitted` — whose ``handle`` is plain
  JSON data saved on the trial row *before* anything else happens, from which any later process can find,
  poll, cancel or re-adopt the trial — or returns :class:`Deferred` with a human reason (no free GPU, no
  free host slot). It never blocks waiting for resources; the manager simply offers the trial again.
  ``submit`` is idempotent per (trial id, attempt): a manager killed between launching a trial and
  recording its handle submits it again after restart, so a platform that finds the attempt already
  launched (``keeper.json`` in its directory, a Slurm job of that name) returns that trial's handle
  instead of starting a second copy.
* ``poll()`` reports, for *all* live trials in one batched call, what happened since the previous call:
  trials that started, metrics in the order the trial reported them, trials that ended (and, where the
  platform queues jobs, why a queued trial still waits, when that changed). Each metric
  carries the channel cursor *after* it; the manager stores metrics and cursor in one transaction, and
  gives the cursor back to ``adopt`` after a restart, so every metric is delivered exactly once.
* ``cancel(trial_id, status)`` ends the trial's whole process tree; the end is then reported by ``poll``
  with the given status (``USER_CANCELED`` or ``EARLY_STOPPED``).
* ``adopt(trial_id, handle, cursor)`` re-attaches a trial started by an earlier manager. If it is still
  running it is polled from then on; if it ended meanwhile the next ``poll`` reports its metrics and real
  outcome; if it vanished without a final record it is reported FAILED with reason "lost" and
  ``failure_kind=INFRASTRUCTURE``.
* ``read_trial_file(trial_id, name)`` returns ``trial.stdout``, ``trial.stderr``, ``trial.log`` or any
  file under the trial directory, while the trial runs and after it ended.
* ``close(kill_trials)`` releases everything; with ``kill_trials=False`` trials keep running detached
  (a manager that is being restarted must not kill them).

Implementations are async and single-threaded (they run on the manager's event loop). Platform
modules import their heavy clients (asyncssh, kubernetes …) lazily so ``platform: local`` needs none.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from trialfleet.status import FailureKind, TrialStatus

if TYPE_CHECKING:
    from trialfleet.config.model import ExperimentConfig, TrainingServiceConfig


@dataclass(frozen=True)
class ExperimentContext:
    """What a training service knows about the experiment it serves."""

    experiment_id: str
    experiment_dir: Path  # <experimentWorkingDirectory>/<id>
    config: ExperimentConfig
    service_config: TrainingServiceConfig
    manager_port: int | None = None

    @property
    def trials_dir(self) -> Path:
        return self.experiment_dir / "trials"


@dataclass(frozen=True)
class TrialSpec:
    """Everything needed to launch one trial attempt, on any platform."""

    trial_id: str
    sequence_id: int
    command: str  # trialCommand, run with ``bash -c``
    code_dir: Path  # the user's trialCodeDirectory on the manager's machine
    parameter_record: str  # exact content of parameter.cfg (NNI ParameterRecord JSON)
    gpu_number: int | None = None  # None: no GPU scheduling, GPUs left visible; 0: CUDA_VISIBLE_DEVICES=''
    attempt: int = 0
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Submitted:
    handle: Mapping[str, Any]  # JSON-serialisable; stored on the trial row
    location: str  # human readable: "local:/path/to/trial" or "host1:/path", shown as logPath
    started: bool = True  # False where the platform queues the job first (Slurm PENDING)


@dataclass(frozen=True)
class Deferred:
    reason: str  # shown to the user while the trial WAITs, e.g. "waiting for 2 free GPUs"


@dataclass(frozen=True)
class TrialMetric:
    trial_id: str
    parameter_id: int | None
    type: str  # "FINAL" or "PERIODICAL"
    sequence: int
    data: str  # the value as the trial serialised it (NNI: ``nni.dump(metric)``)
    timestamp: float
    cursor: Mapping[str, Any]  # channel position just after this metric


@dataclass(frozen=True)
class TrialStarted:
    trial_id: str
    timestamp: float


@dataclass(frozen=True)
class TrialEnded:
    trial_id: str
    status: TrialStatus
    timestamp: float
    exit_code: int | None = None
    message: str | None = None  # short reason: "exit code 3", "killed by signal 9", "lost: host gone"
    failure_kind: FailureKind | None = None


@dataclass(frozen=True)
class TrialProblem:
    """Something wrong a trial did that is not fatal to the manager (malformed metric, …)."""

    trial_id: str
    message: str
    timestamp: float
    cursor: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TrialWaiting:
    """A submitted trial that the platform still queues, and why ("Resources" from Slurm), when that changed."""

    trial_id: str
    reason: str
    timestamp: float


@dataclass
class PollBatch:
    started: list[TrialStarted] = field(default_factory=list)
    metrics: list[TrialMetric] = field(default_factory=list)
    problems: list[TrialProblem] = field(default_factory=list)
    ended: list[TrialEnded] = field(default_factory=list)
    waiting: list[TrialWaiting] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.started or self.metrics or self.problems or self.ended or self.waiting)

    def extend(self, other: PollBatch) -> None:
        self.started += other.started
        self.metrics += other.metrics
        self.problems += other.problems
        self.ended += other.ended
        self.waiting += other.waiting


@dataclass
class LiveTrial:
    """The base class's bookkeeping for one live trial."""

    trial_id: str
    handle: Mapping[str, Any]
    cursor: dict[str, Any]
    spec: TrialSpec | None = None  # None for an adopted trial
    started: bool = False
    cancel_status: TrialStatus | None = None
    state: dict[str, Any] = field(default_factory=dict)  # backend-private


class TrainingService(ABC):
    """Base class: bookkeeping of live trials; platforms fill in the ``_hooks``."""

    platform: ClassVar[str]
    #: optional abilities, read by the manager, the REST server and the contract suite
    supports_gpu_scheduling: ClassVar[bool] = False
    supports_readoption: ClassVar[bool] = True
    #: how often the manager should call poll() when nothing wakes it earlier (seconds)
    poll_interval: ClassVar[float] = 1.0

    def __init__(self, context: ExperimentContext) -> None:
        self.context = context
        self.live: dict[str, LiveTrial] = {}
        #: set by a backend when it knows something changed (a child exited), so the manager polls now
        self.wakeup = asyncio.Event()

    # ---- the public contract -------------------------------------------------------------------

    async def start(self) -> None:
        await self._prepare()

    async def submit(self, spec: TrialSpec) -> Submitted | Deferred:
        result = await self._launch(spec)
        if isinstance(result, Submitted):
            self.live[spec.trial_id] = LiveTrial(
                spec.trial_id, result.handle, {}, spec=spec, started=result.started
            )
        return result

    async def adopt(self, trial_id: str, handle: Mapping[str, Any], cursor: Mapping[str, Any]) -> None:
        self.live[trial_id] = LiveTrial(trial_id, handle, dict(cursor))
        await self._adopt(self.live[trial_id])

    async def poll(self) -> PollBatch:
        self.wakeup.clear()
        if not self.live:
            return PollBatch()
        batch = await self._collect(list(self.live.values()))
        for metric in batch.metrics:
            live = self.live.get(metric.trial_id)
            if live is not None:
                live.cursor.update(metric.cursor)
        for started in batch.started:
            if started.trial_id in self.live:
                self.live[started.trial_id].started = True
        for ended in batch.ended:
            self.live.pop(ended.trial_id, None)
        return batch

    async def cancel(self, trial_id: str, status: TrialStatus = TrialStatus.USER_CANCELED) -> None:
        live = self.live.get(trial_id)
        if live is None:
            return
        live.cancel_status = status
        await self._kill(live)

    async def read_trial_file(self, trial_id: str, handle: Mapping[str, Any], name: str) -> bytes:
        return await self._read_file(handle, name)

    async def close(self, kill_trials: bool = True) -> None:
        if kill_trials:
            for live in list(self.live.values()):
                live.cancel_status = live.cancel_status or TrialStatus.SYS_CANCELED
                await self._kill(live)
        await self._shutdown(kill_trials)

    # ---- hooks for platforms -------------------------------------------------------------------

    async def _prepare(self) -> None:  # noqa: B027 - optional hook
        """Check the platform and prepare it (connect, upload code); raise PlatformError if unusable."""

    @abstractmethod
    async def _launch(self, spec: TrialSpec) -> Submitted | Deferred: ...

    @abstractmethod
    async def _collect(self, trials: list[LiveTrial]) -> PollBatch:
        """One batched look at all live trials; must not block for long."""

    @abstractmethod
    async def _kill(self, trial: LiveTrial) -> None:
        """End the trial's whole process tree; its end is reported by a later ``_collect``."""

    @abstractmethod
    async def _adopt(self, trial: LiveTrial) -> None:
        """Re-attach a trial from its stored handle (may only record state for ``_collect``)."""

    @abstractmethod
    async def _read_file(self, handle: Mapping[str, Any], name: str) -> bytes: ...

    async def _shutdown(self, killed_trials: bool) -> None:  # noqa: B027 - optional hook
        """Release connections and resources."""
