"""The training-service contract on a real Ray cluster: every trial is a Ray job, on the head or the second node.

Both nodes are processes of this machine, so the trials see the control directory where the test wrote it and
their process table is this machine's: the default ``control`` fixture applies. What differs from a local trial:
its code runs in Ray's unpacked copy of the working directory, whose path the trial's node record gives, and a
"crashed worker" is the job's entrypoint killed with everything below it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import RayCluster, descendants, kill_all
from ray_helpers import node_record, ray_context

from trialfleet.testing import TrainingServiceContract
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.ray import RayTrainingService
from trialfleet.training_services.ray.entry import NODE_RECORD

pytestmark = pytest.mark.ray


class TestRayContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> type[RayTrainingService]:
        return RayTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, healthy_cluster: RayCluster) -> ExperimentContext:
        return ray_context(tmp_path / "experiment", healthy_cluster)

    @pytest.fixture
    def hard_kill(self, healthy_cluster: RayCluster) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        async def kill(handle: Mapping[str, Any]) -> None:
            entry_pid = node_record(healthy_cluster, handle["submission_id"])["pid"]
            tree = descendants([entry_pid])
            assert len(tree) >= 3, f"the entrypoint, the keeper and the trial should run: {tree}"
            kill_all(tree)

        return kill

    @pytest.mark.xfail(
        strict=True,  # once the defect is fixed this fails: take the mark away
        reason="known defect, open: run after the module's other cases (as in CI) the re-adopting service finds "
        "the killed job's log empty, so the trial ends as the job's failure (exit -9) instead of lost, and the "
        "metric reported before the kill is missing; alone (-k) the case passes, and shows as XPASS(strict)",
    )
    async def test_adopt_a_trial_whose_keeper_vanished_reports_lost(
        self, services: Any, python_command: str, code_dir: Path, control: Any, hard_kill: Any
    ) -> None:
        await super().test_adopt_a_trial_whose_keeper_vanished_reports_lost(
            services, python_command, code_dir, control, hard_kill
        )

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        """Ray's unpacked copy of the working directory on the node, as the trial's node record names it."""
        record = json.loads((Path(handle["trial_dir"]) / NODE_RECORD).read_text())
        code = Path(record["code_dir"])
        assert (code / "echo.py").read_bytes() == (code_dir / "echo.py").read_bytes()
        return str(code)
