"""``to_json`` (what is stored and served) ↔ ``from_json`` (what ``resume`` reloads), the Python builder,
and the canonicalisation NNI does (advisor → tuner, debug → log level)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.config.conftest import MINIMAL
from trialfleet import LocalConfig
from trialfleet.config import ExperimentConfig, load_config
from trialfleet.errors import ConfigError

EXAMPLES = [
    "local.yml",
    "remote.yml",
    "slurm.yml",
    "kubeflow.yml",
    "frameworkcontroller.yml",
    "openpai.yml",
    "aml.yml",
]
EXAMPLES += [
    "v1_local.yml",
    "v1_remote.yml",
    "v1_pai.yml",
    "v1_kubeflow.yml",
    "v1_frameworkcontroller.yml",
    "v1_adl.yml",
]


@pytest.mark.parametrize("name", EXAMPLES)
def test_round_trip(data_dir: Path, name: str) -> None:
    config = load_config(data_dir / name).config
    stored = json.loads(json.dumps(config.to_json(include_secrets=True)))  # as it goes through the database
    assert ExperimentConfig.from_json(stored) == config
    assert ExperimentConfig.from_json(stored).to_json(include_secrets=True) == stored


def test_canonical_json(data_dir: Path) -> None:
    data = load_config(data_dir / "local.yml").config.to_json()
    assert data["maxExperimentDuration"] == 7200 and data["maxTrialDuration"] == 1800
    assert data["searchSpaceFile"] == str(data_dir / "search_space.json")
    assert data["searchSpace"]["lr"] == {"_type": "loguniform", "_value": [0.0001, 0.1]}
    assert data["trainingService"]["gpuIndices"] == [0, 1]
    assert data["trainingService"]["trialCodeDirectory"] == str(data_dir / "trial_code")
    assert "experimentName" in data and "nniManagerIp" not in data  # None is dropped, as NNI's json()
    assert "advisor" not in data and "sharedStorage" not in data


def test_secrets_are_masked(data_dir: Path) -> None:
    config = load_config(data_dir / "remote.yml").config
    masked = json.dumps(config.to_json())
    assert "hunter2" not in masked and "open sesame" not in masked
    machines = config.to_json()["trainingService"]["machineList"]
    assert machines[0]["sshPassphrase"] == "******" and machines[1]["password"] == "******"
    revealed = config.to_json(include_secrets=True)["trainingService"]["machineList"]
    assert revealed[1]["password"] == "hunter2"
    assert "hunter2" not in repr(config) and "hunter2" not in str(config.training_service)
    token = load_config(data_dir / "openpai.yml").config.to_json()["trainingService"]["token"]
    assert token == "******"


def test_stored_search_space_wins_over_the_file(data_dir: Path, workdir: Path) -> None:
    shutil.copy(data_dir / "local.yml", workdir / "config.yml")
    shutil.copytree(data_dir / "trial_code", workdir / "trial_code")
    config = load_config(workdir / "config.yml").config
    stored = config.to_json()
    (workdir / "search_space.json").unlink()  # edited or moved after the experiment started
    assert ExperimentConfig.from_json(stored).search_space == config.search_space


def test_view_after_the_code_directory_is_gone(workdir: Path, write_config: Callable[..., Path]) -> None:
    stored = load_config(write_config(MINIMAL)).config.to_json()
    (workdir / "code").rmdir()
    with pytest.raises(
        ConfigError, match=r"trainingService\.trialCodeDirectory: code directory .* does not exist"
    ):
        ExperimentConfig.from_json(stored)
    assert (
        ExperimentConfig.from_json(stored, check_paths=False).trial_code_directory
        == workdir.resolve() / "code"
    )


def test_for_platform(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    config = ExperimentConfig.for_platform(
        "local",
        trial_command="python3 trial.py",
        trial_code_directory="code",
        trial_concurrency=2,
        trial_gpu_number=1,
        max_trial_number_per_gpu=2,
        search_space={"x": {"_type": "choice", "_value": [1, 2]}},
        tuner={"name": "TPE"},
        max_experiment_duration="10m",
    )
    service = config.training_service
    assert isinstance(service, LocalConfig)
    assert service.max_trial_number_per_gpu == 2 and service.trial_gpu_number == 1
    assert service.trial_code_directory == workdir.resolve() / "code"  # relative to CWD in Python
    assert config.max_experiment_duration == 600


def test_for_platform_errors() -> None:
    with pytest.raises(ConfigError, match="unknown platform 'mars'; expected one of adl, aml, dlc"):
        ExperimentConfig.for_platform("mars")
    with pytest.raises(ConfigError) as caught:
        ExperimentConfig.for_platform(
            "local", trial_comand="x", trial_concurrency=1, search_space={}, tuner={"name": "TPE"}
        )
    assert "trial_comand: unknown key 'trial_comand' (did you mean 'trialCommand'?)" in str(caught.value)


def test_models_built_in_python_are_accepted(workdir: Path) -> None:
    from trialfleet.config import AlgorithmConfig

    config = ExperimentConfig.from_dict(
        {
            "trialCommand": "python3 trial.py",
            "trialConcurrency": 1,
            "searchSpace": {},
            "tuner": AlgorithmConfig(name="Random"),
            "trainingService": {"platform": "local"},
        },
        base_dir=workdir,
    )
    assert config.tuner.name == "Random"


def test_advisor_becomes_the_tuner(write_config: Callable[..., Path]) -> None:
    loaded = load_config(write_config(MINIMAL.replace("tuner:", "advisor:")))
    assert loaded.config.tuner.name == "TPE" and loaded.config.advisor is None
    assert loaded.warnings == ["advisor is deprecated; it is used as the tuner (rename the key to tuner)"]


def test_advisor_errors_name_the_advisor_key(write_config: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError, match=r"advisor\.name: expected a string, got a list"):
        load_config(write_config(MINIMAL.replace("tuner:\n  name: TPE", "advisor:\n  name: [BOHB]")))


@pytest.mark.parametrize(
    ("extra", "level"),
    [("", "info"), ("debug: true\n", "debug"), ("debug: true\nlogLevel: error\n", "error")],
)
def test_log_level_follows_debug(write_config: Callable[..., Path], extra: str, level: str) -> None:
    config = load_config(write_config(MINIMAL + extra)).config
    assert config.log_level == level
    assert config.training_services[0].debug is config.debug


def test_custom_algorithm_code_directory_defaults_to_the_config_directory(
    write_config: Callable[..., Path], workdir: Path
) -> None:
    config = load_config(write_config(MINIMAL.replace("  name: TPE", "  className: my_tuner.MyTuner"))).config
    assert config.tuner.code_directory == workdir.resolve()


def test_block_values_override_the_shortcuts(write_config: Callable[..., Path], workdir: Path) -> None:
    (workdir / "other").mkdir()
    text = MINIMAL.replace(
        "  platform: local", "  platform: local\n  trialCommand: python3 b.py\n  trialCodeDirectory: other"
    )
    config = load_config(write_config(text)).config
    assert config.trial_command == "python3 trial.py"
    assert config.training_services[0].trial_command == "python3 b.py"
    assert config.training_services[0].trial_code_directory == workdir.resolve() / "other"
