"""Helpers shared by the Slurm platform tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import shlex
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialfleet import SlurmConfig
from trialfleet.testing import Seen, make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.events import PollBatch
from trialfleet.training_services.spec import Submitted, TrialSpec

PYTHON = shlex.quote(sys.executable)
#: hold.py: a trial that records what its job gave it (``<control>/<trial id>.json``), then runs until
#: ``<control>/release`` exists
HOLD = """
import json, os, sys, time
control, name = sys.argv[1], os.environ["NNI_TRIAL_JOB_ID"]
seen = {"job": os.environ.get("SLURM_JOB_ID"), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
        "cwd": os.getcwd(), "code_dir": os.environ.get("NNI_CODE_DIR"), "from_setup": os.environ.get("FROM_SETUP")}
with open(os.path.join(control, name + ".tmp"), "w") as f:
    json.dump(seen, f)
os.rename(os.path.join(control, name + ".tmp"), os.path.join(control, name + ".json"))
while not os.path.exists(os.path.join(control, "release")):
    time.sleep(0.05)
"""


def hold_command(control: Path) -> str:
    """The command of a trial that runs hold.py (the ``code_dir`` fixture's) until ``control``'s release."""
    return f"{PYTHON} hold.py {shlex.quote(str(control))}"


def seen_by(control: Path, trial_id: str) -> dict[str, Any]:
    """What hold.py recorded for ``trial_id``."""
    return dict(json.loads((control / f"{trial_id}.json").read_text()))


def slurm_context(experiment_dir: Path, shared_directory: Path, **options: Any) -> ExperimentContext:
    """A context for SlurmTrainingService with a fresh experiment id (job names never collide)."""
    max_trial_duration = options.pop("max_trial_duration", None)
    config = SlurmConfig(trial_command="unused", shared_directory=shared_directory, **options)
    experiment_id = f"t{uuid.uuid4().hex[:10]}"
    return make_context(experiment_dir, config, experiment_id, max_trial_duration=max_trial_duration)


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
