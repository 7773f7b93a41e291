"""What the OpenPAI platform tests share: configs and contexts pointing at an emulated cluster, trial specs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.emulators.openpai import OpenPAIEmulator
from trialfleet.testing import make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.openpai import OpenpaiConfig
from trialfleet.training_services.spec import Submitted, TrialSpec

#: FrameworkController states kept short: a job takes a few tenths of a second around its command
FAST = {
    "AttemptCreationPending": 0.02,
    "AttemptCreationRequested": 0.01,
    "AttemptPreparing": 0.01,
    "AttemptRunning": 0.01,
    "AttemptDeletionPending": 0.01,
    "AttemptDeletionRequested": 0.01,
    "AttemptDeleting": 0.01,
    "AttemptCompleted": 0.01,
}
CONTAINER_MOUNT = "/mnt/confignfs"


def openpai_block(pai: OpenPAIEmulator, **overrides: Any) -> dict[str, Any]:
    """An NNI ``trainingService`` block (camelCase) for the emulated cluster."""
    block = {
        **pai.nni_config("alice"),
        "trialCommand": "unused",
        "trialCpuNumber": 1,
        "trialMemorySize": "1gb",
        "trialGpuNumber": 0,
        # NNI's default is reuse mode: these tests are of one job per trial unless they ask for reuse
        "reuseMode": False,
    }
    block.update(overrides)
    return block


def openpai_config(pai: OpenPAIEmulator, **overrides: Any) -> OpenpaiConfig:
    return OpenpaiConfig.model_validate(openpai_block(pai, **overrides))


def openpai_context(
    pai: OpenPAIEmulator, experiment_dir: Path, experiment_id: str = "contract", **overrides: Any
) -> ExperimentContext:
    if "trialCodeDirectory" not in overrides:  # shipped at start: a small one, never the cwd (a whole checkout)
        code = experiment_dir.parent / "configured code"
        code.mkdir(parents=True, exist_ok=True)
        overrides["trialCodeDirectory"] = str(code)
    return make_context(experiment_dir, openpai_config(pai, **overrides), experiment_id)


def trial_spec(trial_id: str, command: str, code_dir: Path, **kw: Any) -> TrialSpec:
    record = {
        "parameter_id": 1,
        "parameter_source": "algorithm",
        "parameters": {"x": 1},
        "parameter_index": 0,
    }
    return TrialSpec(trial_id, kw.pop("sequence_id", 0), command, code_dir, json.dumps(record), **kw)


async def submitted(service: TrainingService, spec: TrialSpec) -> Submitted:
    result = await service.submit(spec)
    assert isinstance(result, Submitted), result
    return result


async def wait_for(condition: Any, what: str, timeout: float = 60.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := condition()):
        assert loop.time() < deadline, f"stuck: {what}"
        await asyncio.sleep(0.05)
    return value
