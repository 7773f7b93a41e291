"""The training-service contract, run against the Azure ML platform and the Azure ML emulator.

Jobs run the uploaded code snapshot as local processes (the emulator's common runtime); their trial
directories reach the manager through the jobs' MLflow runs.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aml_helpers import aml_config, job_trial_dir, job_working_dir, worker_trial_dir

from tests.emulators.aml import AmlEmulator
from trialfleet.testing import TrainingServiceContract, make_context, wait_until_gone
from trialfleet.training_services.aml import AmlTrainingService
from trialfleet.training_services.base import ExperimentContext, TrainingService


class TestAmlContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return AmlTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, aml: AmlEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", aml_config(aml))

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        return job_working_dir(handle["job_name"])

    @pytest.fixture
    def hard_kill(self, aml: AmlEmulator) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        """SIGKILL the keeper and the trial's group, as a crashed node would."""

        async def kill(handle: Mapping[str, Any]) -> None:
            keeper = json.loads((job_trial_dir(aml, handle["job_name"]) / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill


class TestAmlReuseContract(TestAmlContract):
    """The same contract with ``reuseMode: true`` (NNI's AML mode, and the default): each trial, run by a
    long-lived worker job and shipped through an MLflow run of its own, keeps every guarantee of a trial that has
    a job of its own."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, aml: AmlEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", aml_config(aml, reuseMode=True))

    @pytest.fixture
    def hard_kill(self, aml: AmlEmulator) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        """SIGKILL the trial's keeper and group in its worker, as a crashed keeper would."""

        async def kill(handle: Mapping[str, Any]) -> None:
            keeper = json.loads((worker_trial_dir(aml, handle) / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill
