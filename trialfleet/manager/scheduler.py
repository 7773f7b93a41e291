"""The scheduler: what runs next.

It keeps the queue of trials waiting for a slot (in submission order), asks the algorithm driver for new
trials while the experiment's limits allow (``trialConcurrency``, ``maxTrialNumber``,
``maxExperimentDuration``), finds trials past ``maxTrialDuration``, and offers the queue's head to the training
service, which either launches it or defers it with a reason shown to the user (a GPU, a host, a cluster
slot): then the queue waits, nothing blocks.
"""

from __future__ import annotations

import logging
from pathlib import Path

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.errors import TrialfleetError
from trialfleet.manager import decisions
from trialfleet.manager.clock import Clock
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.reconciler import log_status_change
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore, TrialRow
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.spec import Deferred, TrialSpec

log = logging.getLogger("trialfleet.manager")


class Scheduler:
    def __init__(self, store: ExperimentStore, driver: AlgorithmDriver, clock: Clock) -> None:
        self.store = store
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
            (parameter_id,) = self.store.allocate_parameter_ids(1)
            proposal = await self.driver.propose(parameter_id)
            if proposal is None:
                return
            record = decisions.parameter_record(parameter_id, proposal.parameters)
            self.queue(self.store.add_trial(decisions.new_trial_id(), record, self.clock.time()).id)

    # ---- submission ----------------------------------------------------------------------------------

    async def submit_pending(self, service: TrainingService, config: ExperimentConfig) -> list[TrialRow]:
        """Offer the queue to the service until it defers one; returns the trials it refused outright."""
        refused: list[TrialRow] = []
        while self.pending:
            trial = self.store.trial(self.pending[0])
            if trial.status is not TrialStatus.WAITING:
                self.pending.pop(0)
                continue
            try:
                result = await service.submit(self.spec(trial, config))
            except TrialfleetError as exc:
                self.pending.pop(0)
                self.store.end_trial(
                    trial.id,
                    TrialStatus.FAILED,
                    self.clock.time(),
                    message=str(exc),
                    failure_kind=FailureKind.INFRASTRUCTURE.value,
                )
                log_status_change(trial.id, TrialStatus.WAITING, TrialStatus.FAILED)
                refused.append(self.store.trial(trial.id))
                continue
            if isinstance(result, Deferred):
                if trial.message != result.reason:
                    self.store.set_waiting_reason(trial.id, result.reason)
                return refused
            self.pending.pop(0)
            self.store.mark_submitted(
                trial.id, result.handle, result.location, self.clock.time(), running=result.started
            )
            if result.started:
                log_status_change(trial.id, TrialStatus.WAITING, TrialStatus.RUNNING)
        return refused

    @staticmethod
    def spec(trial: TrialRow, config: ExperimentConfig) -> TrialSpec:
        service = config.training_services[0]
        return TrialSpec(
            trial_id=trial.id,
            sequence_id=trial.sequence_id,
            command=service.trial_command,
            code_dir=Path(service.trial_code_directory),
            parameter_record=trial.parameters,
            gpu_number=service.trial_gpu_number,
            attempt=trial.attempt,
        )
