"""The training-service contract, run against the local platform."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from training_service_contract import TrainingServiceContract, wait_for_file, wait_until_gone

from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.local import LocalTrainingService


class TestLocalContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return LocalTrainingService

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        async def kill(handle: Mapping[str, Any]) -> None:
            keeper_json = Path(handle["trial_dir"]) / "keeper.json"
            await wait_for_file(keeper_json)  # the command may run before its keeper renamed this into place
            keeper = json.loads(keeper_json.read_text())
            os.kill(handle["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([handle["keeper_pid"], keeper["pid"]])

        return kill
