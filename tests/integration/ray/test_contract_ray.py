"""The training-service contract on a real Ray cluster: every trial is a Ray job, on the head or the second node.

Both nodes are processes of this machine, so the trials see the control directory where the test wrote it and
their process table is this machine's: the default ``control`` fixture applies. What differs from a local trial:
its code runs in Ray's unpacked copy of the working directory, whose path the trial's node record gives, and a
"crashed worker" is the job's entrypoint killed with everything below it, once ``entry.py`` forwarded what the
trial wrote into the job's log (what a node writes in the last fraction of a second before it is lost stays on it,
as any file there does: the relay's vanished-keeper case waits the same way).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import RayCluster, descendants, kill_all
from ray_helpers import forwarded, node_record, ray_context

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
            sid = handle["submission_id"]
            entry_pid = node_record(healthy_cluster, sid)["pid"]
            forwarded(healthy_cluster, sid, {"keeper.json", ".nni/metrics"})
            tree = descendants([entry_pid])
            assert len(tree) >= 3, f"the entrypoint, the keeper and the trial should run: {tree}"
            kill_all(tree)

        return kill

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        """Ray's unpacked copy of the working directory on the node, as the trial's node record names it."""
        record = json.loads((Path(handle["trial_dir"]) / NODE_RECORD).read_text())
        code = Path(record["code_dir"])
        assert (code / "echo.py").read_bytes() == (code_dir / "echo.py").read_bytes()
        return str(code)
