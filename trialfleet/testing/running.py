"""An experiment run by the real manager on the test's own event loop, stopped whatever the test does.

For tests of whole experiments on a platform (Slurm, SSH hosts, Ray, hybrid)::

    async with RunningExperiment(config) as experiment:
        await experiment.done()  # DONE (or ERROR, which fails the test) within the timeout
        trials = experiment.store.trials()

It imports the manager: import it from here (``trialfleet.testing.running``), not from ``trialfleet.testing``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore

HANG_GUARD = 90.0  # how long ``until`` waits for a condition before the test fails as stuck
STOP_TIMEOUT = 120.0  # how long the manager's loop gets to end after the stop


class RunningExperiment:
    """The real experiment manager on a config (created, started, run), on this event loop."""

    def __init__(self, config: ExperimentConfig) -> None:
        self.experiment_id, self.experiment_dir = create_experiment(config)
        self.manager = ExperimentManager(self.experiment_dir)
        self._loop: asyncio.Task[ExperimentStatus] | None = None

    @property
    def store(self) -> ExperimentStore:
        return self.manager.store

    async def __aenter__(self) -> RunningExperiment:
        await self.manager.start()
        self._loop = asyncio.create_task(self.manager.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.manager.request_stop()
        assert self._loop is not None
        await asyncio.wait_for(self._loop, STOP_TIMEOUT)
        self.manager.store.close()

    async def done(self, timeout: float = 300) -> None:
        """Wait until the experiment ended; one that ended in ERROR fails the test with its error."""
        await self.manager.wait_until({ExperimentStatus.DONE, ExperimentStatus.ERROR}, timeout=timeout)
        assert self.manager.error is None, self.manager.error

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = HANG_GUARD) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"stuck: {what}"
            await asyncio.sleep(0.2)
