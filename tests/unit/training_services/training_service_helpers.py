"""Helpers shared by the training-service unit tests."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from trialfleet.testing import harness
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.gpu import GpuInfo, read_gpus_nvidia_smi
from trialfleet.training_services.spec import TrialSpec


def fake_gpu(index: int, *, memory_used: int = 0, utilization: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index:08d}-fake-4a4a-9b9b-00000000000{index}",
        "name": "Tesla T4",
        "memory_total": 15360,
        "memory_used": memory_used,
        "utilization": utilization,
    }


def smi_reader() -> list[GpuInfo]:
    """Only the nvidia-smi path, so a machine with a real NVML driver still sees the double's GPUs."""
    return read_gpus_nvidia_smi() or []


HANG_GUARD = harness.HANG_GUARD


async def poll_until_ended(
    service: TrainingService, trial_ids: set[str], seen: dict[str, TrialEnded]
) -> None:
    """Poll (woken by the service or every poll_interval) until every trial in ``trial_ids`` ended."""
    polled = await harness.poll_until(service, lambda polled: trial_ids <= seen.keys() | polled.ended.keys())
    seen.update(polled.ended)


async def wait_for_file(path: Path) -> str:
    """The text of ``path`` once it exists."""
    await harness.wait_for_file(path)
    return path.read_text()


def spec(trial_id: str, command: str, code_dir: Path, **kw: Any) -> TrialSpec:
    record = json.dumps(
        {"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
    )
    return TrialSpec(trial_id, kw.pop("sequence_id", 0), command, code_dir, record, **kw)


def held_command(control: Path, trial_id: str, report: str = "") -> str:
    """A trial that records ``report`` (a shell expression) in control/<id>.out, then waits for <id>.release."""
    out, release = (
        shlex.quote(str(control / f"{trial_id}.out")),
        shlex.quote(str(control / f"{trial_id}.release")),
    )
    return f'echo "{report}" > {out}.tmp && mv {out}.tmp {out}; while [ ! -e {release} ]; do sleep 0.02; done'
