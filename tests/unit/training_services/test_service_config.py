"""The training-service seam is typed by its platform's config model: a service built on another platform's
block is refused by name instead of failing later on a missing attribute."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trialfleet.testing import make_context
from trialfleet.training_services.local import LocalConfig, LocalTrainingService
from trialfleet.training_services.slurm import SlurmConfig, SlurmTrainingService


def test_a_service_gets_its_own_config_model_as_self_config(tmp_path: Path) -> None:
    context = make_context(tmp_path / "experiment", LocalConfig(trial_command="unused"))
    assert LocalTrainingService(context).config is context.service_config


def test_a_service_built_on_another_platforms_block_is_refused_naming_both(tmp_path: Path) -> None:
    context = make_context(tmp_path / "experiment", LocalConfig(trial_command="unused"))
    with pytest.raises(TypeError, match=r"^slurm: a LocalConfig is not a SlurmConfig$"):
        SlurmTrainingService(context)


def test_a_subclass_of_the_config_model_is_accepted(tmp_path: Path) -> None:
    class Narrower(SlurmConfig):
        pass

    config = Narrower(trial_command="unused", shared_directory=str(tmp_path / "shared"))
    context = dataclasses.replace(make_context(tmp_path / "experiment", config), service_config=config)
    assert SlurmTrainingService(context).config is config
