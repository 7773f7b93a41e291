"""The training-service contract, run against the local platform."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from trialfleet.testing import TrainingServiceContract, make_context, wait_until_gone
from trialfleet.training_services import ExperimentContext, LocalConfig, LocalTrainingService, TrainingService


class TestLocalContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return LocalTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path) -> ExperimentContext:
        return make_context(tmp_path / "experiment 'dir' ü", LocalConfig(trial_command="unused"))

    @pytest.fixture
    def hard_kill(self, control) -> Callable[[Mapping[str, Any]], Awaitable[None]]:  # type: ignore[no-untyped-def]
        async def kill(handle: Mapping[str, Any]) -> None:
            keeper_json = Path(handle["trial_dir"]) / "keeper.json"
            while not keeper_json.exists():  # the command may run before its keeper renamed this into place
                await asyncio.sleep(0.02)
            keeper = json.loads(keeper_json.read_text())
            os.kill(handle["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([handle["keeper_pid"], keeper["pid"]])

        return kill
