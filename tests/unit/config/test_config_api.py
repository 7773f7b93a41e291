"""The names other packages import from ``trialfleet.config`` (a change here is a change for them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import trialfleet
import trialfleet.config
from trialfleet.config.experiment import ExperimentConfig
from trialfleet.training_services.registry import BUILTIN_PLATFORMS, platforms


def test_public_names() -> None:
    required = {"ExperimentConfig", "AlgorithmConfig", "TrainingServiceConfig"}
    required |= {
        "LoadedConfig",
        "load_config",
        "parse_time",
        "parse_size",
    }
    required |= {"convert_v1_to_v2"}
    assert required <= set(trialfleet.config.__all__)
    assert all(hasattr(trialfleet.config, name) for name in trialfleet.config.__all__)
    assert ExperimentConfig is trialfleet.config.ExperimentConfig


def test_every_platform_names_its_own_config_model() -> None:
    """Each platform's block is validated by the model its registry entry names, whose platform tag matches."""
    for name, platform in platforms().items():
        config_class = platform.config_class()
        assert issubclass(config_class, trialfleet.config.TrainingServiceConfig)
        assert config_class.model_fields["platform"].default == name
        if name in BUILTIN_PLATFORMS:  # NNI's class names, exported as nni.experiment exports them
            assert getattr(trialfleet, config_class.__name__) is config_class
    assert set(BUILTIN_PLATFORMS) == {
        "local",
        "remote",
        "slurm",
        "ray",
        "openpai",
        "aml",
        "dlc",
        "kubeflow",
        "frameworkcontroller",
    } | {
        "adl",
        "dlts",
    }


@pytest.mark.slow
def test_import_stays_light() -> None:
    source = "import sys, trialfleet.config; print(sorted(m for m in ('fastapi', 'uvicorn', 'httpx', 'numpy', 'typer') if m in sys.modules))"
    output = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"
