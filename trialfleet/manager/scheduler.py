"""The scheduler: what runs next.

It keeps the queue of trials waiting for a slot (in submission order), asks the algorithm driver for new
trials while the experiment's limits allow (``trialConcurrency``, ``maxTrialNumber``,
``maxExperimentDuration``), finds trials past ``maxTrialDuration``, and offers the queue's head to the training
service, which either launches it or defers it with a reason shown to the user (a GPU, a host, a cluster
slot): then the queue waits, nothing blocks. In a hybrid experiment each trial is offered to the platforms in
the order :mod:`.placement` gives, and the queue waits only once every platform deferred one. A platform whose
launches may overlap (``concurrent_submits``, as over SSH) is offered the whole queue at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.errors import TrialfleetError
from trialfleet.manager import decisions
from trialfleet.manager.clock import Clock
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.placement import placement_order, unplaced_reason, waiting_reason
from trialfleet.manager.platforms import Platforms
from trialfleet.manager.reconciler import log_status_change
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore, TrialRow
from trialfleet.storage.patience import PatientWrites
from trialfleet.training_services.spec import Deferred, TrialSpec

log = logging.getLogger("trialfleet.manager")


class Scheduler:
    def __init__(
        self, store: ExperimentStore, driver: AlgorithmDriver, clock: Clock, write: PatientWrites
    ) -> None:
        self.store = store
        self.write = write  # the store's writes, waited out while another process holds its lock
        self.driver = driver
        self.clock = clock
        self.pending: list[str] = []  # WAITING trials not yet placed, in submission order

    def queue(self, trial_id: str) -> None:
        self.pending.append(trial_id)

    def unqueue(self, trial_id: str) -> None:
        if trial_id in self.pending:
            self.pending.remove(trial_id)

    # ---- limits --------------------------------------------------------------------------------------

    @staticmethod
    def budget(config: ExperimentConfig) -> decisions.Budget:
        return decisions.Budget(config.max_trial_number, config.max_experiment_duration)

    def submitted_count(self) -> int:
        return self.store.experiment().next_sequence_id

    def live_count(self) -> int:
        counts = self.store.trial_counts()
        return counts.get(TrialStatus.WAITING, 0) + counts.get(TrialStatus.RUNNING, 0)

    def budget_exhausted(self, config: ExperimentConfig, exec_duration: float) -> bool:
        return decisions.budget_exhausted(self.budget(config), self.submitted_count(), exec_duration)

    def overdue(self, config: ExperimentConfig) -> list[str]:
        """Running trials past ``maxTrialDuration``."""
        if config.max_trial_duration is None:
            return []  # without reading every running trial each step: 10,000 of them take 0.2 s
        running = [(t.id, t.start_time) for t in self.store.trials(status=TrialStatus.RUNNING)]
        return decisions.overdue_trials(running, self.clock.time(), config.max_trial_duration)

    # ---- new trials ----------------------------------------------------------------------------------

    async def request_trials(self, config: ExperimentConfig, exec_duration: float) -> None:
        """Ask the driver for as many new trials as the limits allow now."""
        if self.driver.tuner_done or self.budget_exhausted(config, exec_duration):
            return
        wanted = decisions.new_trials_allowed(
            config.trial_concurrency, self.live_count(), self.budget(config), self.submitted_count()
        )
        for _ in range(wanted):
            (parameter_id,) = await self.write(self.store.allocate_parameter_ids, 1)
            proposal = await self.driver.propose(parameter_id)
            if proposal is None:
                return
            record = decisions.parameter_record(parameter_id, proposal.parameters)
            trial = await self.write(self.store.add_trial, decisions.new_trial_id, record, self.clock.time())
            self.queue(trial.id)

    # ---- submission ----------------------------------------------------------------------------------

    async def submit_pending(self, platforms: Platforms) -> list[TrialRow]:
        """Offer the queue, in order, to the platforms placement picks, until every platform deferred a trial
        this round; returns the trials refused outright. A single platform whose launches may overlap
        (``concurrent_submits``: a launch over SSH is a round trip and a process start) is offered the whole
        queue at once."""
        if not platforms.hybrid and platforms.members[0].service.concurrent_submits:
            return await self._submit_at_once(platforms)
        refused: list[TrialRow] = []
        round_ = _Round()
        index = 0
        while index < len(self.pending):
            trial = self.store.trial(self.pending[index])
            if trial.status is not TrialStatus.WAITING:
                self.pending.pop(index)
                continue
            if not placement_order(platforms.loads(), skip=round_.deferred):  # no platform takes one now
                await self._explain(trial, platforms, round_)
                break
            outcome = await self._offer(trial, platforms, round_)
            if outcome is None:
                index += 1
                continue
            self.pending.pop(index)
            if outcome.status is TrialStatus.FAILED:
                refused.append(outcome)
        return refused

    async def _submit_at_once(self, platforms: Platforms) -> list[TrialRow]:
        """The queue offered to its one platform at once, each trial launched while the others are. The queue
        holds no more trials than the experiment has free slots (``request_trials``); the platform block's own
        ``trialConcurrency``, if set, bounds them too."""
        waiting = []
        for trial_id in list(self.pending):
            trial = self.store.trial(trial_id)
            if trial.status is TrialStatus.WAITING:
                waiting.append(trial)
            else:
                self.pending.remove(trial_id)
        if not waiting:
            return []
        round_ = _Round()
        loads = platforms.loads()
        if not placement_order(loads):  # the platform cannot take any now
            await self._explain(waiting[0], platforms, round_)
            return []
        if loads[0].limit is not None:  # the block's own trialConcurrency
            waiting = waiting[: loads[0].limit - loads[0].live]
        outcomes = await asyncio.gather(*(self._offer(trial, platforms, round_) for trial in waiting))
        refused = []
        for trial, outcome in zip(waiting, outcomes, strict=True):
            if outcome is not None:
                self.unqueue(trial.id)  # (a cancel may have taken it out meanwhile)
                if outcome.status is TrialStatus.FAILED:
                    refused.append(outcome)
        return refused

    async def _explain(self, trial: TrialRow, platforms: Platforms, round_: _Round) -> None:
        pinned = trial.platform if platforms.hybrid else None
        reason = unplaced_reason(platforms.loads(), round_.reasons, pinned)
        if trial.message != reason:
            await self.write(self.store.set_waiting_reason, trial.id, reason, self.clock.time())

    async def _offer(self, trial: TrialRow, platforms: Platforms, round_: _Round) -> TrialRow | None:
        """Offer one trial to the platforms in placement order: the trial as stored once one took it (or it
        was refused outright), None while it waits."""
        placing = trial.platform is None  # else pinned: it may have started there already
        order = platforms.order(trial, round_.deferred)
        refused: dict[str, str] = {}
        for platform in order:
            if platforms.hybrid and trial.platform != platform.name:
                await self.write(
                    self.store.place_trial, trial.id, platform.name
                )  # durable before it is asked
            try:
                result = await platform.service.submit(self.spec(trial, platform.config))
            except TrialfleetError as exc:
                if platforms.hybrid:
                    log.warning("platform %s refused trial %s: %s", platform.name, trial.id, exc)
                refused[platform.name] = f"refused: {exc}" if platforms.hybrid else str(exc)
                round_.reasons[platform.name] = refused[platform.name]
                continue
            if isinstance(result, Deferred):
                round_.defer(platform.name, result.reason)
                if result.sticky:
                    placing = False
                    break
                continue
            await self.write(
                self.store.mark_submitted,
                trial.id,
                result.handle,
                result.location,
                self.clock.time(),
                running=result.started,
                platform=platform.name,
            )
            if result.started:
                log_status_change(trial.id, TrialStatus.WAITING, TrialStatus.RUNNING)
            return self.store.trial(trial.id)
        if order and len(refused) == len(order):  # every platform asked refused it outright
            await self.write(
                self.store.end_trial,
                trial.id,
                TrialStatus.FAILED,
                self.clock.time(),
                message=waiting_reason(refused),
                failure_kind=FailureKind.INFRASTRUCTURE.value,
            )
            log_status_change(trial.id, TrialStatus.WAITING, TrialStatus.FAILED)
            return self.store.trial(trial.id)
        if placing and platforms.hybrid:
            await self.write(
                self.store.place_trial, trial.id, None
            )  # it deferred everywhere: free to go anywhere next time
        await self._explain(self.store.trial(trial.id), platforms, round_)
        return None

    @staticmethod
    def spec(trial: TrialRow, service: TrainingServiceConfig) -> TrialSpec:
        return TrialSpec(
            trial_id=trial.id,
            sequence_id=trial.sequence_id,
            command=service.trial_command,
            code_dir=Path(service.trial_code_directory),
            parameter_record=trial.parameters,
            gpu_number=service.trial_gpu_number,
            attempt=trial.attempt,
        )


@dataclass
class _Round:
    """What the platforms answered during one offering of the queue."""

    deferred: set[str] = field(default_factory=set)  # not asked again this round
    reasons: dict[str, str] = field(default_factory=dict)  # each platform's last answer

    def defer(self, platform: str, reason: str) -> None:
        self.reasons[platform] = reason
        self.deferred.add(platform)
