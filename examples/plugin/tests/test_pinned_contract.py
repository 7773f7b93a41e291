"""trialfleet's contract suite, run on this plugin as on every built-in platform; plus what pinning adds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from trialfleet_pinned import PinnedConfig, PinnedTrainingService

from trialfleet.testing import TrainingServiceContract, make_context, poll_until, wait_until_gone
from trialfleet.training_services import Deferred, ExperimentContext, Submitted, TrainingService

CPU_SETS = ["0", "0"]  # two sets naming the same core: any machine runs the suite


class TestPinnedContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return PinnedTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path) -> ExperimentContext:
        config = PinnedConfig(trial_command="unused", cpu_sets=CPU_SETS, niceness=5)
        return make_context(tmp_path / "experiment", config)

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        async def kill(handle: Mapping[str, Any]) -> None:
            keeper_json = Path(handle["trial_dir"]) / "keeper.json"
            while not keeper_json.exists():
                await asyncio.sleep(0.02)
            keeper = json.loads(keeper_json.read_text())
            os.kill(handle["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([handle["keeper_pid"], keeper["pid"]])

        return kill


async def test_trials_run_pinned_and_wait_for_a_free_set(tmp_path: Path) -> None:
    config = PinnedConfig(trial_command="unused", cpu_sets=["0"], niceness=7)
    service = PinnedTrainingService(make_context(tmp_path / "experiment", config))
    await service.start()
    code = tmp_path / "code"
    code.mkdir()
    probe = "grep Cpus_allowed_list /proc/self/status; ps -o ni= -p $$; echo $PINNED_CPU_SET"
    record = json.dumps({"parameter_id": 0, "parameters": {}})
    from trialfleet.training_services import TrialSpec

    first = await service.submit(TrialSpec("a", 0, probe + "; sleep 0.5", code, record))
    second = await service.submit(TrialSpec("b", 1, probe, code, record))
    assert isinstance(first, Submitted)
    assert isinstance(second, Deferred) and "waiting for a free CPU set" in second.reason
    await poll_until(service, lambda seen: "a" in seen.ended)
    out = (await service.read_trial_file("a", first.handle, "stdout")).decode().split()
    # `nice -n 7` adds to the niceness the test runs at (a CI job may itself run niced)
    assert out == ["Cpus_allowed_list:", "0", str(min(19, os.nice(0) + 7)), "0"]
    assert isinstance(await service.submit(TrialSpec("b", 1, probe, code, record)), Submitted)
    await service.close()
