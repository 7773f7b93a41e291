"""The reconciler: what the training service saw, written to the store before anyone acts on it.

Each poll's batch becomes store writes — waiting reasons, starts, metrics together with the channel cursor
after them (one transaction: every metric stored exactly once), problems, ends — and only then reaches the
algorithm driver. On resume it walks the stored trials once: a running one is re-adopted from its handle,
one stopped by the previous manager's shutdown is re-run, one never submitted is queued again; nothing is
silently dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trialfleet.manager import decisions
from trialfleet.manager.clock import Clock
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.platforms import Platforms
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric, TrialRow
from trialfleet.storage.patience import PatientWrites
from trialfleet.training_services.events import PollBatch, TrialEnded, TrialMetric, TrialProblem

log = logging.getLogger("trialfleet.manager")

_CANCELED = (TrialStatus.USER_CANCELED, TrialStatus.SYS_CANCELED, TrialStatus.EARLY_STOPPED)


@dataclass
class Applied:
    """What a batch asks of the manager once it is stored."""

    ended: list[TrialRow] = field(default_factory=list)  # trials that ended, as stored
    early_stop: list[str] = field(default_factory=list)  # trials the assessor wants stopped


@dataclass
class Resumed:
    """How each stored trial was taken up by a resumed manager."""

    pending: list[str] = field(default_factory=list)  # to submit, in order
    outcome: dict[str, int] = field(
        default_factory=lambda: {"adopted": 0, "rerun": 0, "queued": 0, "finished": 0}
    )


def log_status_change(trial_id: str, before: TrialStatus, after: TrialStatus) -> None:
    """NNI's line for it, which users' scripts grep in nnimanager.log."""
    if before is not after:
        log.info("Trial job %s status changed from %s to %s", trial_id, before.value, after.value)


class Reconciler:
    def __init__(
        self, store: ExperimentStore, driver: AlgorithmDriver, clock: Clock, write: PatientWrites
    ) -> None:
        self.store = store
        self.write = write  # the store's writes, waited out while another process holds its lock
        self.driver = driver
        self.clock = clock
        self.cancel_requested: set[str] = set()  # trials the manager asked to end (user, assessor, limits)

    async def apply(self, batch: PollBatch, *, stopping: bool = False) -> Applied:
        applied = Applied()
        for waiting in batch.waiting:
            await self.write(
                self.store.set_waiting_reason, waiting.trial_id, waiting.reason, self.clock.time()
            )
        for started in batch.started:
            before = self.store.trial(started.trial_id).status
            await self.write(self.store.mark_running, started.trial_id, started.timestamp)
            log_status_change(started.trial_id, before, TrialStatus.RUNNING)
        finals = await self._store_metrics(batch) if batch.metrics or batch.problems else set()
        for problem in batch.problems:
            log.warning("trial %s: %s", problem.trial_id, problem.message)
            await self.write(self.store.add_problem, problem.trial_id, problem.message, problem.timestamp)
        for metric in batch.metrics:
            if not await self._feed(metric, finals):
                applied.early_stop.append(metric.trial_id)
        for ended in batch.ended:
            stored = self.store.trial(ended.trial_id)
            status, failure_kind = self._ending(ended, stored, stopping)
            self.cancel_requested.discard(ended.trial_id)
            self.driver.forget(ended.trial_id)
            before = stored.status
            await self.write(
                self.store.end_trial,
                ended.trial_id,
                status,
                ended.timestamp,
                exit_code=ended.exit_code,
                message=ended.message,
                failure_kind=failure_kind,
            )
            applied.ended.append(self.store.trial(ended.trial_id))
            log_status_change(ended.trial_id, before, status)
        return applied

    def _ending(self, ended: TrialEnded, stored: TrialRow, stopping: bool) -> tuple[TrialStatus, str | None]:
        """The status and failure kind to store. A trial the manager asked to end ends with the reason stored
        before the request was sent — which the platform, or a service that re-adopted the trial after the
        manager was killed, may not know; one the experiment's stop ended is re-run (by resume, or at once
        when a resumed manager sees it end)."""
        status = ended.status
        failure_kind = ended.failure_kind.value if ended.failure_kind else None
        requested = stored.cancel_status
        if requested is not None or ended.trial_id in self.cancel_requested:
            if status is TrialStatus.FAILED:
                failure_kind = FailureKind.CANCELED.value  # killed by the request
            elif requested is not None and status in _CANCELED:
                status = requested
        if status is TrialStatus.SYS_CANCELED and (stopping or requested is TrialStatus.SYS_CANCELED):
            failure_kind = FailureKind.EXPERIMENT_STOPPED.value
        return status, failure_kind

    async def _feed(self, metric: TrialMetric, finals: set[str]) -> bool:
        """Give a stored metric to the driver; False when the assessor wants the trial stopped. ``finals``: the
        trials whose final result this batch set, until their first FINAL metric is given."""
        if metric.type == "FINAL":
            if metric.trial_id in finals:  # only the first FINAL metric counts, as in NNI
                finals.discard(metric.trial_id)
                await self.driver.final_result(self.store.trial(metric.trial_id), metric.value)
            return True
        if metric.trial_id in self.cancel_requested:
            return True
        if await self.driver.keep_running(metric.trial_id, metric.sequence, metric.value):
            return True
        self.cancel_requested.add(metric.trial_id)  # its later metrics in this batch are not assessed again
        return False

    async def _store_metrics(self, batch: PollBatch) -> set[str]:
        """Store the batch's metrics and cursors; returns the trials whose final result they set."""
        # a live trial's metrics are its current attempt's: an earlier attempt ended before this one ran
        attempts = self.store.current_attempts({m.trial_id for m in batch.metrics})
        rows = []
        for m in batch.metrics:
            final_value = None
            if m.type == "FINAL":
                final_value = decisions.scalar_of(m.value)
            attempt = attempts[m.trial_id]
            rows.append(
                NewMetric(
                    m.trial_id, m.parameter_id, m.type, m.sequence, m.data, m.timestamp, final_value, attempt
                )
            )
        cursors: dict[str, dict[str, Any]] = {}
        items: list[TrialMetric | TrialProblem] = [*batch.metrics, *batch.problems]
        for item in items:
            cursor = cursors.setdefault(item.trial_id, {})
            for channel, offset in (item.cursor or {}).items():
                # metrics and problems interleave in a stream: the cursor is the furthest point read
                cursor[channel] = max(offset, cursor.get(channel, offset))
        return await self.write(self.store.add_metrics, rows, {tid: c for tid, c in cursors.items() if c})

    # ---- resume --------------------------------------------------------------------------------------

    async def resume(self, platforms: Platforms) -> Resumed:
        """Every unfinished trial is re-adopted, re-queued or re-run; the driver gets the history."""
        resumed = Resumed()
        trials = []
        adopted: list[str] = []
        for stored in self.store.trials():
            trial, what = await self._resume_trial(platforms, stored, resumed.pending.append)
            resumed.outcome[what] += 1
            trials.append(trial)
            if what == "adopted":
                adopted.append(trial.id)
        await self.write(
            self.store.add_trial_events, "ADOPTED", self.clock.time(), adopted
        )  # one transaction for them all
        periodical = self.store.metrics(type="PERIODICAL") if self.driver.assessor is not None else []
        await self.driver.restore(trials, periodical)
        await self.write(self.store.add_event, "EXPERIMENT_RESUMED", self.clock.time(), data=resumed.outcome)
        log.info(
            "resumed: %(adopted)d running trials re-adopted, %(rerun)d re-run, %(queued)d queued",
            resumed.outcome,
        )
        return resumed

    async def _resume_trial(
        self, platforms: Platforms, trial: TrialRow, queue: Callable[[str], None]
    ) -> tuple[TrialRow, str]:
        if trial.status is TrialStatus.SYS_CANCELED and trial.failure_kind == FailureKind.EXPERIMENT_STOPPED:
            trial = await self.write(
                self.store.retry_trial, trial.id, self.clock.time(), "re-run after resume"
            )
            queue(trial.id)
            return trial, "rerun"
        if trial.status.is_terminal:
            return trial, "finished"
        if trial.handle is not None:  # back to the platform that launched it
            await platforms.adopt(trial)
            if trial.cancel_status in (TrialStatus.USER_CANCELED, TrialStatus.EARLY_STOPPED):
                # asked of the previous manager, which may have been killed before sending it
                self.cancel_requested.add(trial.id)
                await platforms.cancel(trial.id, trial.cancel_status)
            return trial, "adopted"
        queue(trial.id)
        return trial, "queued"
