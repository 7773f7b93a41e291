"""Keys ignore case and underscores at every nesting level (NNI's ``case_insensitive``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.config.conftest import MINIMAL
from trialfleet import RemoteConfig
from trialfleet.config import ExperimentConfig, load_config
from trialfleet.config.keys import fold
from trialfleet.errors import ConfigError


@pytest.mark.parametrize(
    "spelling", ["trialCommand", "trial_command", "TrialCommand", "_TRIALCOMMAND_", "TRIAL_command"]
)
def test_top_level_spellings(workdir: Path, spelling: str) -> None:
    config = ExperimentConfig.from_dict(
        {
            spelling: "python3 trial.py",
            "searchSpace": {},
            "trialConcurrency": 1,
            "tuner": {"name": "TPE"},
            "trainingService": {"platform": "local"},
        },
        base_dir=workdir,
    )
    assert config.trial_command == "python3 trial.py"
    assert config.training_services[0].trial_command == "python3 trial.py"


def test_every_nesting_level(write_config: Callable[..., Path]) -> None:
    path = write_config(
        """\
        search_space_file: search_space.json
        TRIAL_COMMAND: python3 trial.py
        trial_code_directory: code
        trial_concurrency: 2
        Tuner:
          NAME: TPE
          class_args: {optimize_mode: maximize}
        training_service:
          PLATFORM: remote
          machine_list:
            - HOST: h1
              USER: alice
              ssh_key_file: key
              max_trial_number_per_gpu: 1
        shared_storage:
          storage_type: NFS
          local_mount_point: /mnt/nfs
          remote_mount_point: /mnt/nfs
          LOCAL_MOUNTED: usermount
          nfs_server: 10.0.0.1
          exported_directory: /export
        """
    )
    config = load_config(path).config
    service = config.training_service
    assert isinstance(service, RemoteConfig)
    assert service.machine_list[0].host == "h1"
    assert service.machine_list[0].ssh_key_file == path.parent / "key"
    assert config.tuner.class_args == {"optimize_mode": "maximize"}
    assert config.shared_storage is not None
    assert config.shared_storage.local_mounted == "usermount"


def test_free_form_mappings_keep_their_keys(workdir: Path) -> None:
    """classArgs and the search space belong to the user: their keys are not folded."""
    config = ExperimentConfig.from_dict(
        {
            "trialCommand": "x",
            "trialConcurrency": 1,
            "searchSpace": {"Learning_Rate": {"_type": "choice", "_value": [1]}},
            "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "maximize", "Seed_Value": 1}},
            "trainingService": {"platform": "local"},
        },
        base_dir=workdir,
    )
    assert config.tuner.class_args == {"optimize_mode": "maximize", "Seed_Value": 1}
    assert config.search_space is not None
    assert list(config.search_space) == ["Learning_Rate"]


def test_two_spellings_of_one_key_are_refused(write_config: Callable[..., Path]) -> None:
    path = write_config(MINIMAL + "trial_concurrency: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "trial_concurrency: 'trial_concurrency' and 'trialConcurrency' are the same key" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("key", "folded"),
    [("trialCommand", "trialcommand"), ("_TRIAL_COMMAND_", "trialcommand"), ("gpuIndices", "gpuindices")],
)
def test_fold(key: str, folded: str) -> None:
    assert fold(key) == folded
