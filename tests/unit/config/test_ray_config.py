"""``platform: ray``: the block NNI-style configs write, and what it refuses with a reason."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from trialfleet.config import ExperimentConfig
from trialfleet.errors import ConfigError
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.storage import secrets
from trialfleet.storage.store import DB_RELATIVE_PATH
from trialfleet.training_services.ray import RayConfig


def experiment(tmp_path: Path, workdir: Path | None = None, **service: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCommand": "python3 trial.py",
        "trialCodeDirectory": str(tmp_path),
        "trialConcurrency": 2,
        "trialGpuNumber": 1,
        "tuner": {"name": "Random"},
        "trainingService": {"platform": "ray", "address": "http://head:8265", **service},
    }
    if workdir is not None:
        data["experimentWorkingDirectory"] = str(workdir)
    return ExperimentConfig.from_dict(data)


def test_a_full_block(tmp_path: Path) -> None:
    config = experiment(
        tmp_path,
        token="s3cret",
        runtimeEnv={"pip": ["torch"], "env_vars": {"A": "1"}},
        trialCpuNumber=0.5,
        trialMemorySize="2gb",
        trialResources={"ssd": 1},
        nodeDirectory="/scratch/tf",
    )
    ray = config.training_services[0]
    assert isinstance(ray, RayConfig)
    assert (ray.trial_cpu_number, ray.trial_memory_size, ray.trial_gpu_number) == (0.5, 2048, 1)
    assert ray.runtime_env == {"pip": ["torch"], "env_vars": {"A": "1"}}
    assert ray.http_headers() == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(ray)


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        ({"address": "ray://head:10001"}, "Ray Client address"),
        ({"address": "head:8265"}, "dashboard address"),
        ({"runtimeEnv": {"working_dir": "/code"}}, "trialCodeDirectory is the job's working_dir"),
        ({"trialResources": {"GPU": 1}}, "set trialGpuNumber"),
        ({"trialResources": {"ssd": 0}}, "positive amount"),
        ({"nodeDirectory": "relative/dir"}, "absolute path"),
        ({"token": "t", "headers": {"authorization": "Bearer u"}}, "keep one of them"),
        ({"maxTrialNumberPerNode": 2}, "maxTrialNumberPerNode"),
    ],
)
def test_refused_with_a_reason(tmp_path: Path, service: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        experiment(tmp_path, **service)
    assert expected in str(error.value)


def test_the_token_is_a_secret_kept_out_of_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    config = experiment(tmp_path, token="s3cret-t0ken", workdir=tmp_path / "exps")
    _, experiment_dir = create_experiment(config)
    conn = sqlite3.connect(experiment_dir / DB_RELATIVE_PATH)
    try:
        assert "s3cret-t0ken" not in "\n".join(conn.iterdump())
    finally:
        conn.close()
    kept = json.loads((experiment_dir / secrets.SECRETS_FILE).read_text())
    assert kept == {"/trainingService/token": "s3cret-t0ken"}
    manager = ExperimentManager(experiment_dir)
    ray = manager.config.training_services[0]
    assert isinstance(ray, RayConfig) and ray.http_headers() == {"Authorization": "Bearer s3cret-t0ken"}
    assert "s3cret-t0ken" not in json.dumps(manager.config.to_json())
    manager.store.close()
