"""The experiment's platforms: one training service per ``trainingService`` block (hybrid: several).

The manager talks to them through this one object: it starts them all, polls them all in one batch, sends a
cancel, a re-adoption or a file read to the platform that holds the trial (the trial row's ``platform``), and
orders the platforms for the next trial (:mod:`.placement`). The scheduler offers trials.

A hybrid experiment goes on while one of its platforms cannot: a platform that fails to start, or whose poll
raises, leaves the experiment — logged, stored as a ``PLATFORM_FAILED`` event, shown by ``/check-status`` —
and its live trials are reported lost (FAILED, infrastructure), so ``maxTrialRetries`` re-runs them on the
others. A platform that says it cannot start trials for now (:meth:`TrainingService.unavailable`: every host
unreachable) gets none until it can. With a single platform nothing of this applies: its failure is the
experiment's, as it always was.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from trialfleet.config.service import TrainingServiceConfig
from trialfleet.errors import PlatformError
from trialfleet.manager.placement import PlatformLoad, placement_order
from trialfleet.status import TrialStatus
from trialfleet.storage import TrialRow
from trialfleet.training_services.base import LiveTrial, TrainingService
from trialfleet.training_services.events import PollBatch, TrialEnded
from trialfleet.training_services.trial_dir import lost

log = logging.getLogger("trialfleet.manager")

CLOSE_FAILED_TIMEOUT = 60.0  # a failed platform's close (ending what it still runs) is given this long


class PlatformState(str, Enum):
    UP = "UP"
    UNAVAILABLE = "UNAVAILABLE"  # cannot start trials for now (its own reason); comes back by itself
    FAILED = "FAILED"  # left the experiment: its start or its poll failed


@dataclass
class Platform:
    name: str  # its ``platform``; unique in an experiment
    config: TrainingServiceConfig
    service: TrainingService
    state: PlatformState = PlatformState.UP
    message: str | None = None  # why it is not UP

    @property
    def weight(self) -> float:
        return 1.0 if self.config.placement_weight is None else self.config.placement_weight

    def status(self) -> dict[str, Any]:
        """As ``/check-status`` shows it."""
        shown: dict[str, Any] = {
            "platform": self.name,
            "status": self.state.value,
            "trials": len(self.service.live),
        }
        if self.message is not None:
            shown["message"] = self.message
        return shown


#: called when a platform changes state: (platform, new state, why)
StateListener = Callable[[Platform, PlatformState, "str | None"], None]


class Platforms:
    def __init__(self, members: list[Platform], on_change: StateListener | None = None) -> None:
        if not members:
            raise ValueError("an experiment has at least one platform")
        self.members = members
        self.by_name = {member.name: member for member in members}
        self.on_change = on_change
        self._lost: list[TrialEnded] = []  # trials re-adopted onto a platform that failed: reported by poll
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def hybrid(self) -> bool:
        return len(self.members) > 1

    @property
    def running(self) -> list[Platform]:
        return [m for m in self.members if m.state is not PlatformState.FAILED]

    @property
    def live(self) -> dict[str, LiveTrial]:
        """Every live trial of the platforms still in the experiment."""
        return {trial_id: trial for m in self.running for trial_id, trial in m.service.live.items()}

    @property
    def poll_interval(self) -> float:
        return min(m.service.poll_interval for m in self.running) if self.running else 1.0

    def of(self, trial: TrialRow) -> Platform:
        """The platform that holds the trial (it has a ``platform`` since it was placed; older rows: the only
        one)."""
        if trial.platform is None and not self.hybrid:
            return self.members[0]
        member = self.by_name.get(trial.platform or "")
        if member is None:
            raise PlatformError(
                f"trial {trial.id} ran on platform {trial.platform!r}, which this experiment lacks"
            )
        return member

    # ---- life cycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every platform at once. A single platform's failure is raised as is; in a hybrid experiment a
        platform that cannot start is reported and left out, and only all of them failing is an error."""
        if not self.hybrid:
            await self.members[0].service.start()
            return
        outcomes = await asyncio.gather(*(m.service.start() for m in self.members), return_exceptions=True)
        for member, outcome in zip(self.members, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                self._fail(member, f"it did not start: {outcome}", exc=outcome)
        if not self.running:
            lines = "\n".join(f"  - {m.name}: {m.message}" for m in self.members)
            raise PlatformError(f"no platform of this hybrid experiment started:\n{lines}")

    async def close(self, kill_trials: bool = True) -> None:
        for member in self.running:
            await member.service.close(kill_trials=kill_trials)
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=CLOSE_FAILED_TIMEOUT)

    # ---- state ---------------------------------------------------------------------------------------

    def _set_state(self, member: Platform, state: PlatformState, message: str | None) -> None:
        if (member.state, member.message) == (state, message):
            return
        member.state, member.message = state, message
        if self.on_change is not None:
            self.on_change(member, state, message)

    def _fail(self, member: Platform, message: str, *, exc: BaseException | None = None) -> list[TrialEnded]:
        """Take a platform out of the experiment; its live trials are lost (and are ended there if it can)."""
        log.error("platform %s failed: %s", member.name, message, exc_info=exc)
        live = list(member.service.live)
        self._set_state(member, PlatformState.FAILED, message)
        if live:
            task = asyncio.create_task(self._close_failed(member))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return [lost(trial_id, f"lost: platform {member.name} failed: {message}") for trial_id in live]

    @staticmethod
    async def _close_failed(member: Platform) -> None:
        try:
            await asyncio.wait_for(member.service.close(kill_trials=True), CLOSE_FAILED_TIMEOUT)
        except Exception as exc:
            log.warning("platform %s: ending its trials after it failed: %s", member.name, exc)

    def _check_availability(self) -> None:
        for member in self.running:
            why = member.service.unavailable()
            state = PlatformState.UP if why is None else PlatformState.UNAVAILABLE
            self._set_state(member, state, why)

    def loads(self) -> list[PlatformLoad]:
        return [
            PlatformLoad(
                m.name,
                m.weight,
                len(m.service.live),
                m.config.trial_concurrency,
                down=m.message if m.state is PlatformState.UNAVAILABLE else None,
                failed=m.state is PlatformState.FAILED,
            )
            for m in self.members
        ]

    def order(self, trial: TrialRow, skip: set[str]) -> list[Platform]:
        """The platforms to offer this waiting trial to, best first (see :mod:`.placement`)."""
        pinned = trial.platform if self.hybrid else None
        return [self.by_name[name] for name in placement_order(self.loads(), pinned=pinned, skip=skip)]

    def status(self) -> list[dict[str, Any]]:
        return [m.status() for m in self.members]

    def problems(self) -> list[str]:
        """What a user should hear about: platforms failed or unavailable."""
        return [f"platform {m.name} {m.state.value.lower()}: {m.message}" for m in self.members if m.message]

    # ---- trials --------------------------------------------------------------------------------------

    async def poll(self) -> PollBatch:
        """Every platform's batch (all asked at once), after the trials lost with a platform that failed."""
        if not self.hybrid:
            return await self.members[0].service.poll()
        batch = PollBatch(ended=self._lost)
        self._lost = []
        running = self.running
        answers = await asyncio.gather(*(m.service.poll() for m in running), return_exceptions=True)
        for member, answer in zip(running, answers, strict=True):
            if isinstance(answer, PollBatch):
                batch.extend(answer)
            elif not isinstance(answer, Exception) or len(self.running) == 1:
                raise answer  # the last platform standing: its failure is the experiment's
            else:
                batch.ended.extend(self._fail(member, f"its poll failed: {answer}", exc=answer))
        self._check_availability()
        return batch

    async def adopt(self, trial: TrialRow) -> None:
        assert trial.handle is not None
        member = self.of(trial)
        if member.state is PlatformState.FAILED:
            self._lost.append(lost(trial.id, f"lost: platform {member.name} failed: {member.message}"))
            return
        await member.service.adopt(trial.id, trial.handle, trial.cursor)

    async def cancel(self, trial_id: str, status: TrialStatus) -> None:
        for member in self.running:
            if trial_id in member.service.live:
                await member.service.cancel(trial_id, status)

    async def read_trial_file(self, trial: TrialRow, name: str) -> bytes:
        assert trial.handle is not None
        return await self.of(trial).service.read_trial_file(trial.id, trial.handle, name)

    def trial_dir_here(self, trial: TrialRow) -> Path | None:
        assert trial.handle is not None
        return self.of(trial).service.trial_dir_here(trial.handle)

    async def wait_for_wakeup(self, timeout: float) -> None:
        """Until a platform asks to be polled (a trial ended), or ``timeout``."""
        waiters = [asyncio.ensure_future(m.service.wakeup.wait()) for m in self.running]
        if not waiters:
            await asyncio.sleep(timeout)
            return
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
