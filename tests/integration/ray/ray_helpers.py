"""What the Ray tests share: contexts on the session's cluster, and a look at a job through Ray's own client."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ray.job_submission import JobSubmissionClient
from ray_cluster import RayCluster

from trialfleet.config import ExperimentConfig
from trialfleet.testing import make_context
from trialfleet.testing.running import HANG_GUARD
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.ray import RayConfig
from trialfleet.training_services.ray.entry import NODE_RECORD, unframe


def new_experiment_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def ray_context(
    experiment_dir: Path, cluster: RayCluster, experiment_id: str | None = None, **config: Any
) -> ExperimentContext:
    config.setdefault("node_directory", str(cluster.root / "trials"))  # removed with the cluster
    service = RayConfig(trial_command="unused", address=cluster.address, **config)
    return make_context(experiment_dir, service, experiment_id=experiment_id or new_experiment_id())


def client(cluster: RayCluster) -> JobSubmissionClient:
    return JobSubmissionClient(cluster.address)


def node_record(cluster: RayCluster, submission_id: str) -> dict[str, Any]:
    """entry.py's node.json, read from the job's log as Ray serves it (no trialfleet involved)."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        for line in client(cluster).get_job_logs(submission_id).splitlines():
            found = unframe(line)
            if found is not None and found[0] == NODE_RECORD:
                return dict(json.loads(found[1]))
        assert time.monotonic() < deadline, f"stuck: {submission_id} never logged its node record"
        time.sleep(0.2)


def forwarded(cluster: RayCluster, submission_id: str, files: set[str]) -> None:
    """Wait until the job's log, as Ray serves it, carries some of each of ``files`` of the trial directory."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        lines = client(cluster).get_job_logs(submission_id).splitlines()
        sent = {found[0] for found in map(unframe, lines) if found is not None and found[1]}
        if files <= sent:
            return
        assert time.monotonic() < deadline, f"stuck: {submission_id} never logged {sorted(files - sent)}"
        time.sleep(0.2)


def experiment_config(tmp_path: Path, cluster: RayCluster, trial: str, **fields: Any) -> ExperimentConfig:
    """An NNI-style experiment on the cluster: ``trial`` is the code of trial.py, run with this python."""
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(trial)
    service = {"platform": "ray", "address": cluster.address, "nodeDirectory": str(cluster.root / "trials")}
    data: dict[str, Any] = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCommand": f"{sys.executable} trial.py",
        "trialCodeDirectory": str(code),
        "trialConcurrency": 1,
        "maxTrialNumber": 1,
        "tuner": {"name": "Random"},
        "experimentWorkingDirectory": str(tmp_path / "experiments"),
        **fields,
    }
    data["trainingService"] = {**service, **data.pop("trainingService", {})}
    return ExperimentConfig.from_dict(data)
