"""The training-service contract, run against the DLTS platform and the DLTS dashboard emulator.

Jobs run as local processes in a private mount namespace where the emulated NFS export is mounted at
``/work``: trials see their control directory there, and run in the copy of the code directory made on the
storage.
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
from dlts_helpers import dlts_config

from tests.emulators.dlts import DltsEmulator
from trialfleet.testing import TrainingServiceContract, TrialHost, make_context, wait_until_gone
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.dlts import DltsTrainingService
from trialfleet.training_services.mounted_storage import code_copy_name


class TestDltsContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return DltsTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, dlts: DltsEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", dlts_config(dlts))

    @pytest.fixture
    def control(self, dlts: DltsEmulator) -> TrialHost:
        path = dlts.work_dir() / "control"
        path.mkdir()
        return TrialHost(path, "/work/control")

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        return posixpath.join("/work/contract/code", code_copy_name(code_dir.resolve()))

    @pytest.fixture
    def hard_kill(self, dlts: DltsEmulator) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        """SIGKILL the keeper (the pod's main process) and the trial's group, as a crashed node would."""

        async def kill(handle: Mapping[str, Any]) -> None:
            trial_dir = dlts.work_dir() / Path(handle["trial_dir"]).relative_to("/work")
            keeper = json.loads((trial_dir / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill


class TestDltsReuseContract(TestDltsContract):
    """The same contract with ``reuseMode: true``: each trial, run by a long-lived worker job, keeps every
    guarantee of a trial that has a job of its own."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, dlts: DltsEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", dlts_config(dlts, reuseMode=True))
