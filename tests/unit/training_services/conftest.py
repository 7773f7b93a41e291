"""Fixtures for the training-service unit tests: a scripted nvidia-smi and experiment contexts."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from training_service_helpers import smi_reader

from trialfleet.testing import make_context
from trialfleet.training_services import ExperimentContext, LocalConfig
from trialfleet.training_services.local import LocalTrainingService

DOUBLES = Path(__file__).resolve().parents[2] / "doubles"


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Put the nvidia-smi double first on PATH, answering for the scenario given to the returned function."""
    assert (DOUBLES / "nvidia-smi").stat().st_mode & 0o111, "tests/doubles/nvidia-smi must be executable"
    monkeypatch.setenv("PATH", f"{DOUBLES}:{os.environ['PATH']}")
    scenario_file = tmp_path / "gpus.json"
    monkeypatch.setenv("TRIALFLEET_FAKE_GPUS", str(scenario_file))
    # the machine's GPU leases of this test alone: the double's GPUs are nobody else's
    monkeypatch.setenv("TRIALFLEET_LEASE_DIR", str(tmp_path / "gpu-leases"))

    def scenario(
        gpus: list[dict[str, Any]], processes: list[dict[str, Any]] | None = None, **extra: Any
    ) -> Path:
        scenario_file.write_text(json.dumps({"gpus": gpus, "processes": processes or [], **extra}))
        return scenario_file

    return scenario


@pytest.fixture
def context_for(tmp_path: Path) -> Callable[..., ExperimentContext]:
    """An ExperimentContext for the local platform, with these LocalConfig fields."""

    def make(**service_options: Any) -> ExperimentContext:
        config = LocalConfig(trial_command="unused", **service_options)
        return make_context(tmp_path / "experiment", config, "unitexp")

    return make


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A trial code directory and a control directory (held_command's files)."""
    code, control = tmp_path / "code", tmp_path / "control"
    code.mkdir()
    control.mkdir()
    return code, control


@pytest.fixture
async def local_services():  # type: ignore[no-untyped-def]
    """Start local platforms (GPUs read through the nvidia-smi double only); closed, trials killed, at the end."""
    started: list[LocalTrainingService] = []

    async def start(context: ExperimentContext) -> LocalTrainingService:
        service = LocalTrainingService(context, gpu_reader=smi_reader)
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await service.close(kill_trials=True)
