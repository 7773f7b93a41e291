"""The training-service contract, run against the OpenPAI platform on the OpenPAI emulator.

Trials run as the emulator's containers: local processes in a private mount namespace where the storage is
bind-mounted at ``/mnt/confignfs``. The control directory the suite steers its trials through lives on that
storage, so trials reach it at its container path; the code directory is copied onto the storage, so trials run
in the copy.
"""

from __future__ import annotations

import json
import os
import posixpath
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from openpai_helpers import CONTAINER_MOUNT, openpai_context

from tests.emulators.openpai import OpenPAIEmulator
from trialfleet.testing import TrainingServiceContract, TrialHost, wait_until_gone
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.openpai import OpenpaiTrainingService


class TestOpenpaiContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return OpenpaiTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, pai: OpenPAIEmulator) -> ExperimentContext:
        return openpai_context(pai, tmp_path / "experiment 'dir' ü")

    @pytest.fixture
    def control(self, tmp_path: Path, pai: OpenPAIEmulator) -> TrialHost:
        local = tmp_path / "nfs" / "control"
        local.mkdir()
        return TrialHost(local, seen_by_trials=posixpath.join(CONTAINER_MOUNT, "control"))

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        return posixpath.join(CONTAINER_MOUNT, "contract", "code", code_copy_name(code_dir.resolve()))

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        """SIGKILL the keeper and the trial's group inside the container, as a crashed node would."""

        async def kill(handle: Mapping[str, Any]) -> None:
            keeper = json.loads((Path(handle["trial_dir"]) / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill


class TestOpenpaiReuseContract(TestOpenpaiContract):
    """The same contract in reuse mode (NNI's default on OpenPAI): each trial, run by a long-lived worker job,
    keeps every guarantee of a trial that has a job of its own."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, pai: OpenPAIEmulator) -> ExperimentContext:
        return openpai_context(pai, tmp_path / "experiment 'dir' ü", reuseMode=True)
