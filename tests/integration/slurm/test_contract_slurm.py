"""The training-service contract, run against the Slurm platform on a real single-node Slurm.

The shared directory is the test's temp directory, which holds the code directories too: trials run in
the code directory itself, as the contract expects (the copy made for a code directory outside the shared
directory is tested in test_slurm_jobs.py).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from slurm_cluster import SlurmCluster
from slurm_helpers import slurm_context

from trialfleet.testing import TrainingServiceContract, wait_until_gone
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.slurm import SlurmTrainingService

pytestmark = pytest.mark.slurm


class TestSlurmContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return SlurmTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, slurm_cluster: SlurmCluster) -> ExperimentContext:
        return slurm_context(tmp_path / "experiment 'dir' ü", tmp_path)

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        """SIGKILL the keeper (the job's batch process) and the trial's group, as a crashed node would."""

        async def kill(handle: Mapping[str, Any]) -> None:
            keeper = json.loads((Path(handle["trial_dir"]) / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill


class TestSlurmReuseContract(TestSlurmContract):
    """The same contract with ``reuseMode: true``: each trial, run by a long-lived worker job, keeps every
    guarantee of a trial that has a job of its own (hard_kill kills the trial's keeper, not its worker)."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, slurm_cluster: SlurmCluster) -> ExperimentContext:
        return slurm_context(tmp_path / "experiment 'dir' ü", tmp_path, reuse_mode=True)
