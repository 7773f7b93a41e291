"""The names other packages import from ``trialfleet.config`` (a change here is a change for them)."""

from __future__ import annotations

import subprocess
import sys
import typing

import trialfleet.config
from trialfleet.config import model


def test_public_names() -> None:
    required = {"ExperimentConfig", "AlgorithmConfig", "TrainingServiceConfig", "LocalConfig", "RemoteConfig"}
    required |= {
        "RemoteMachineConfig",
        "SlurmConfig",
        "LoadedConfig",
        "load_config",
        "parse_time",
        "parse_size",
    }
    required |= {"convert_v1_to_v2"}
    assert required <= set(trialfleet.config.__all__)
    assert all(hasattr(trialfleet.config, name) for name in trialfleet.config.__all__)
    assert model.ExperimentConfig is trialfleet.config.ExperimentConfig


def test_training_service_union_names_every_platform() -> None:
    (union, _field) = typing.get_args(model.TrainingServiceConfig)
    platforms = {cls.model_fields["platform"].default for cls in typing.get_args(union)}
    assert platforms == set(model.PLATFORM_CLASSES)
    assert platforms == {
        "local",
        "remote",
        "slurm",
        "openpai",
        "aml",
        "dlc",
        "kubeflow",
        "frameworkcontroller",
    } | {
        "adl",
        "dlts",
    }


def test_import_stays_light() -> None:
    source = "import sys, trialfleet.config; print(sorted(m for m in ('fastapi', 'uvicorn', 'httpx', 'numpy', 'typer') if m in sys.modules))"
    output = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"
