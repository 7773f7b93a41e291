"""The training-service seam: what every platform (local, remote, slurm, kubernetes …) implements.

Contract (every built-in platform passes the suite :mod:`trialfleet.testing.contract` ships, run per platform
from ``tests/contract`` and ``tests/integration/<platform>``; a plugin runs it the same way):

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
* ``read_trial_file(trial_id, handle, name)`` returns ``trial.stdout``, ``trial.stderr``, ``trial.log`` or any
  file under the trial directory, while the trial runs and after it ended, from the trial's stored handle (so
  a trial no longer live, or of an earlier manager, is read too).
* ``close(kill_trials)`` releases everything; with ``kill_trials=False`` trials keep running detached
  (a manager that is being restarted must not kill them).

Implementations are async and single-threaded (they run on the manager's event loop). Platform
modules import their heavy clients (asyncssh, kubernetes …) lazily so ``platform: local`` needs none.

Typing: ``TrainingService[C, H]`` is generic over the platform's config model ``C`` (``self.config``, checked
against ``config_class`` when the service is built) and its handle ``H``: a ``TypedDict`` of JSON values, the very
data stored on the trial row (so it is its own ``to_json``/``from_json``; what a restarted manager hands ``adopt``
is what ``submit`` returned). mypy then checks each platform's use of its config and of its handles' keys
(``LiveTrial[H]``, ``Submitted[H]``) without casts. The manager holds services as ``TrainingService[Any, Any]``.
A platform module names ``LiveTrial = base.LiveTrial[ItsHandle]``, so its hooks' annotations say ``LiveTrial``.

A platform is a package below this one (``local/``, ``remote/``, ``slurm/`` …) holding its service class and its
config model (``config_class``), found by name through :mod:`.registry` — built-ins and third-party plugins alike.
What several platforms share lives once beside this module: the trial spec and events (:mod:`.spec`,
:mod:`.events`), the trial environment (:mod:`.environment`), attempt naming (:mod:`.naming`), the trial directory
protocol (:mod:`.trial_dir`, :mod:`.metric_channels`), reading trial directories here or over SSH
(:mod:`.trial_files`), the support bundle (:mod:`.support`), SSH links with back-off (:mod:`.ssh`), and what the
batch-job platforms share: job watcher, outcome table, collect loop (:mod:`.batch`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from trialfleet.errors import PlatformNotAvailableError
from trialfleet.status import TrialStatus
from trialfleet.training_services.events import PollBatch, TrialWaiting
from trialfleet.training_services.registry import get_platform
from trialfleet.training_services.spec import Deferred, H, Submitted, TrialSpec

if TYPE_CHECKING:
    from trialfleet.config.experiment import ExperimentConfig
    from trialfleet.config.service import TrainingServiceConfig

log = logging.getLogger(__name__)

#: a platform's config model
C = TypeVar("C", bound="TrainingServiceConfig")


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


@dataclass
class LiveTrial(Generic[H]):
    """The base class's bookkeeping for one live trial."""

    trial_id: str
    handle: H
    cursor: dict[str, Any]
    spec: TrialSpec | None = None  # None for an adopted trial
    started: bool = False
    cancel_status: TrialStatus | None = None
    state: dict[str, Any] = field(default_factory=dict)  # backend-private

    def waiting_changed(self, reason: str | None) -> list[TrialWaiting]:
        """Why the platform still queues the trial, as an event when the reason changed (none when it did not)."""
        if reason == self.state.get("waiting_reason"):
            return []
        self.state["waiting_reason"] = reason
        return [TrialWaiting(self.trial_id, reason, time.time())] if reason else []


class TrainingService(ABC, Generic[C, H]):
    """Base class: bookkeeping of live trials; platforms fill in the ``_hooks``."""

    platform: ClassVar[str]
    #: the platform's config model (a subclass of ``trialfleet.config.TrainingServiceConfig``); a class attribute
    #: (not a ClassVar only because a ClassVar cannot name the type variable)
    config_class: type[C]
    #: how often the manager should call poll() when nothing wakes it earlier (seconds); an instance may set its
    #: own (reuse mode looks for the end of its workers' trials more often)
    poll_interval: float = 1.0
    #: trials run a copy of the code directory that the platform packs, uploads or copies (``code_packing``):
    #: NNI's limits on it are then checked before an experiment is created
    ships_code: ClassVar[bool] = False
    #: ``submit`` may be called again before an earlier call returned (it reserves its host and GPUs before its
    #: first wait): the scheduler then offers every waiting trial at once instead of one launch after another
    concurrent_submits: ClassVar[bool] = False
    #: ``prepare`` takes next to no CPU in the manager (no imports, handshakes or uploads): the manager process
    #: then imports its web server meanwhile. Otherwise it does so once the platforms are prepared, since their
    #: preparation is on the way to the first trial and the server is not (``create`` waits for both anyway)
    light_preparation: ClassVar[bool] = False
    #: modules the platform's start imports beyond its own (asyncssh for SSH hosts): a standby manager imports
    #: them while it waits for the experiment, so they are not on the way to its first trial
    preload_modules: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def shipped_code_directories(cls, service_config: C, working_directory: Path) -> list[Path]:
        """The code directories this platform would ship for ``service_config`` (none if it runs them in place),
        for an experiment whose working directory is ``working_directory``."""
        return [Path(service_config.trial_code_directory)] if cls.ships_code else []

    @classmethod
    def refusals(cls, service_config: C) -> list[str]:
        """Why ``service_config`` cannot start, found on this machine alone (no network): ``create`` refuses
        it before making the experiment. The service's own start still checks everything else."""
        return []

    def __init__(self, context: ExperimentContext) -> None:
        self.context = context
        config = context.service_config
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"{self.platform}: a {type(config).__name__} is not a {self.config_class.__name__}"
            )
        self.config: C = config
        self.live: dict[str, LiveTrial[H]] = {}
        #: set by a backend when it knows something changed (a child exited), so the manager polls now
        self.wakeup = asyncio.Event()

    # ---- the public contract -------------------------------------------------------------------

    async def start(self) -> None:
        await self._prepare()

    async def submit(self, spec: TrialSpec) -> Submitted[H] | Deferred:
        result = await self._launch(spec)
        if isinstance(result, Submitted):
            self.live[spec.trial_id] = LiveTrial(
                spec.trial_id, result.handle, {}, spec=spec, started=result.started
            )
        return result

    async def adopt(self, trial_id: str, handle: H, cursor: Mapping[str, Any]) -> None:
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

    async def read_trial_file(self, trial_id: str, handle: H, name: str) -> bytes:
        return await self._read_file(handle, name)

    async def gpu_leases(self) -> dict[str, dict[str, Any]]:
        """What every experiment holds and waits for on the machines this platform leases GPUs on, by machine:
        ``{machine: {experiment: {"gpus", "waiting", "waitingSince"}}}`` (docs/shared-fleet.md); none here."""
        return {}

    def unavailable(self) -> str | None:
        """Why the platform cannot start trials now (every host unreachable …), or None. A hybrid experiment
        places its trials on its other platforms meanwhile, and reports it."""
        return None

    def trial_dir_here(self, handle: H) -> Path | None:
        """The trial's directory as this machine sees it, when its files can be opened here (the server then
        streams them to clients, whatever their size); None: they are read whole with ``read_trial_file``."""
        return None

    async def close(self, kill_trials: bool = True) -> None:
        if kill_trials:
            for live in list(self.live.values()):
                live.cancel_status = live.cancel_status or TrialStatus.SYS_CANCELED
                await self._kill(live)
        await self._shutdown(kill_trials)

    # ---- hooks for platforms -------------------------------------------------------------------

    async def _prepare(self) -> None:
        """Check the platform and prepare it (connect, upload code); raise PlatformError if unusable."""

    @abstractmethod
    async def _launch(self, spec: TrialSpec) -> Submitted[H] | Deferred: ...

    @abstractmethod
    async def _collect(self, trials: list[LiveTrial[H]]) -> PollBatch:
        """One batched look at all live trials; must not block for long."""

    @abstractmethod
    async def _kill(self, trial: LiveTrial[H]) -> None:
        """End the trial's whole process tree; its end is reported by a later ``_collect``."""

    @abstractmethod
    async def _adopt(self, trial: LiveTrial[H]) -> None:
        """Re-attach a trial from its stored handle (may only record state for ``_collect``)."""

    @abstractmethod
    async def _read_file(self, handle: H, name: str) -> bytes: ...

    async def _shutdown(self, killed_trials: bool) -> None:
        """Release connections and resources."""

    # ---- helpers for platforms -----------------------------------------------------------------

    async def _wait_for_trials_to_end(
        self,
        ended: Callable[[list[LiveTrial[H]]], Awaitable[Iterable[str]]],
        timeout: float,
        *,
        interval: float = 0.1,
    ) -> None:
        """After ``close`` cancelled the live trials, wait until ``ended`` (ids of those known to be over) covers
        them all, or ``timeout`` passed, which is logged: whatever still runs is the platform's to report."""
        waiting = dict(self.live)
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for trial_id in set(await ended(list(waiting.values()))):
                waiting.pop(trial_id, None)
            if waiting:
                await asyncio.sleep(interval)
        if waiting:
            log.warning(
                "%s: trials %s were still running %.0f s after the cancel",
                self.platform,
                sorted(waiting),
                timeout,
            )


def get_training_service_class(name: str) -> type[TrainingService[Any, Any]]:
    """The training service of the platform ``name`` (built-in or plugin, :mod:`.registry`)."""
    platform = get_platform(name)
    cls = platform.service_class()
    if not (isinstance(cls, type) and issubclass(cls, TrainingService)):
        raise PlatformNotAvailableError(
            f"platform {name!r} ({platform.source}): {platform.service} is not a TrainingService subclass"
        )
    return cls
