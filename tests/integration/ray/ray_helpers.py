"""What the Ray tests share: contexts on the session's cluster, and a look at a job through Ray's own client."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from ray.job_submission import JobSubmissionClient
from ray_cluster import RayCluster

from trialfleet.testing import make_context
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.ray import RayConfig
from trialfleet.training_services.ray.entry import NODE_RECORD, unframe

HANG_GUARD = 90.0


def new_experiment_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def ray_context(
    experiment_dir: Path, cluster: RayCluster, experiment_id: str | None = None, **config: Any
) -> ExperimentContext:
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
