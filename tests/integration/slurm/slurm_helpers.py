"""Helpers shared by the Slurm platform tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_service_contract import Seen, make_context

from trialfleet.training_services.base import (
    ExperimentContext,
    PollBatch,
    Submitted,
    TrainingService,
    TrialSpec,
)

#: every option of SlurmConfig that the service reads, unset
SLURM_OPTIONS: dict[str, Any] = {
    "partition": None,
    "account": None,
    "qos": None,
    "time_limit": None,
    "cpus_per_trial": None,
    "memory": None,
    "gpu_request_style": "gres",
    "sbatch_options": [],
    "setup_script": None,
    "login_node": None,
    "use_sacct": None,
    "python_path": None,
}


def slurm_context(experiment_dir: Path, shared_directory: Path, **options: Any) -> ExperimentContext:
    """A context for SlurmTrainingService with a fresh experiment id (job names never collide)."""
    settings = {**SLURM_OPTIONS, "shared_directory": shared_directory, **options}
    return make_context(experiment_dir, f"t{uuid.uuid4().hex[:10]}", **settings)


def trial_spec(trial_id: str, command: str, code_dir: Path, **fields: Any) -> TrialSpec:
    record = {
        "parameter_id": 1,
        "parameter_source": "algorithm",
        "parameters": {"x": 1},
        "parameter_index": 0,
    }
    return TrialSpec(trial_id, 0, command, code_dir, json.dumps(record), **fields)


async def submitted(service: TrainingService, spec: TrialSpec) -> Submitted:
    result = await service.submit(spec)
    assert isinstance(result, Submitted), result
    return result


@dataclass(frozen=True)
class OverTimeLimit:
    """A trial submitted with a one-minute time limit that it overruns."""

    context: ExperimentContext
    handle: dict[str, Any]


@dataclass
class SeenQueued(Seen):
    """What was polled, with the last reason reported for each trial waiting in Slurm's queue."""

    waiting: dict[str, str] = field(default_factory=dict)

    def add(self, batch: PollBatch) -> None:
        super().add(batch)
        self.waiting.update({entry.trial_id: entry.reason for entry in batch.waiting})
