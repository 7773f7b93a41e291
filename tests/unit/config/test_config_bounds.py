"""Every number of a config is bounded: the bound itself loads, one past it is refused naming the key path and
the bound, whether it comes from a v2 file, a legacy v1 file or a running experiment's update."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.config.conftest import MINIMAL
from trialfleet.config import ExperimentConfig, load_config
from trialfleet.errors import ConfigError

Write = Callable[..., Path]

BASE: dict[str, Any] = yaml.safe_load(MINIMAL)
TEN_YEARS = 10 * 365 * 86400
MACHINE = {"host": "h", "user": "u", "port": 22}

#: (key path, v2 fragment with the largest accepted value, the same one past it, what the error says)
BOUNDS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("trialConcurrency", {"trialConcurrency": 10_000}, {"trialConcurrency": 2**70}, "at most 10000"),
    ("maxTrialNumber", {"maxTrialNumber": 1_000_000}, {"maxTrialNumber": 2**63}, "at most 1000000"),
    (
        "maxExperimentDuration",
        {"maxExperimentDuration": "3650d"},
        {"maxExperimentDuration": 1e308},
        "expected a duration of at most 3650d (ten years), got 1e+308",
    ),
    (
        "maxTrialDuration",
        {"maxTrialDuration": TEN_YEARS},
        {"maxTrialDuration": "1e300h"},
        "at most 3650d (ten years), got '1e300h'",
    ),
    ("maxTrialRetries", {"maxTrialRetries": 100}, {"maxTrialRetries": 101}, "at most 100, got 101"),
    ("trialGpuNumber", {"trialGpuNumber": 1024}, {"trialGpuNumber": 1025}, "at most 1024, got 1025"),
    ("tunerGpuIndices", {"tunerGpuIndices": "0,1023"}, {"tunerGpuIndices": [0, 2**64]}, "at most 1023"),
    (
        "trainingService.maxTrialNumberPerGpu",
        {"trialGpuNumber": 1, "trainingService": {"platform": "local", "maxTrialNumberPerGpu": 1000}},
        {"trialGpuNumber": 1, "trainingService": {"platform": "local", "maxTrialNumberPerGpu": 1001}},
        "at most 1000",
    ),
    (
        "trainingService.gpuIndices",
        {"trainingService": {"platform": "local", "gpuIndices": [1023]}},
        {"trainingService": {"platform": "local", "gpuIndices": [1024]}},
        "GPU indices must be at most 1023, got 1024",
    ),
    (
        "trainingService.unreachableGracePeriod",
        {
            "trainingService": {
                "platform": "remote",
                "machineList": [MACHINE],
                "unreachableGracePeriod": "3650d",
            }
        },
        {
            "trainingService": {
                "platform": "remote",
                "machineList": [MACHINE],
                "unreachableGracePeriod": "3651d",
            }
        },
        "at most 3650d",
    ),
    (
        "trainingService.machineList[0].port",
        {"trainingService": {"platform": "remote", "machineList": [MACHINE | {"port": 65535}]}},
        {"trainingService": {"platform": "remote", "machineList": [MACHINE | {"port": 65536}]}},
        "less than 65536",
    ),
    (
        "trainingService.timeLimit",
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "timeLimit": "87600h"}},
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "timeLimit": "87601h"}},
        "at most 3650d",
    ),
    (
        "trainingService.memory",
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "memory": "1024tb"}},
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "memory": "1025tb"}},
        "expected a memory size of at most 1024tb, got '1025tb'",
    ),
    (
        "trainingService.cpusPerTrial",
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "cpusPerTrial": 100_000}},
        {"trainingService": {"platform": "slurm", "sharedDirectory": "/tmp", "cpusPerTrial": 100_001}},
        "at most 100000",
    ),
    (  # FrameworkController's own rule (-1: no limit) is checked before the 32-bit integer's
        "trainingService.taskRoles[0].frameworkAttemptCompletionPolicy.minFailedTaskCount",
        {"trainingService": {"platform": "frameworkcontroller", "taskRoles": [{"minFailedTaskCount": -1}]}},
        {
            "trainingService": {
                "platform": "frameworkcontroller",
                "taskRoles": [{"minFailedTaskCount": -(2**63)}],
            }
        },
        "at least -1, got -9223372036854775808",
    ),
]


def _frameworkcontroller(fragment: dict[str, Any]) -> dict[str, Any]:
    """A whole task role around the completion policy the fragment sets."""
    service = fragment.get("trainingService", {})
    if service.get("platform") != "frameworkcontroller":
        return fragment
    role = {"name": "worker", "dockerImage": "img", "taskNumber": 2, "command": "python3 t.py"}
    role |= {"gpuNumber": 0, "cpuNumber": 1, "memorySize": "1gb"}
    failed = service["taskRoles"][0]["minFailedTaskCount"]
    role["frameworkAttemptCompletionPolicy"] = {"minFailedTaskCount": failed, "minSucceedTaskCount": 1}
    storage = {"storageType": "nfs", "server": "nfs.example", "path": "/exports"}
    return {"trainingService": {"platform": "frameworkcontroller", "taskRoles": [role], "storage": storage}}


def _config(workdir: Path, fragment: dict[str, Any]) -> dict[str, Any]:
    data = BASE | _frameworkcontroller(fragment)
    data["searchSpaceFile"] = str(workdir / "search_space.json")
    data["trialCodeDirectory"] = str(workdir / "code")
    return data


@pytest.mark.parametrize(("key_path", "largest", "beyond", "message"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_the_bound_loads_and_one_past_it_is_refused(
    workdir: Path, key_path: str, largest: dict[str, Any], beyond: dict[str, Any], message: str
) -> None:
    ExperimentConfig.from_dict(_config(workdir, largest))
    with pytest.raises(ConfigError) as caught:
        ExperimentConfig.from_dict(_config(workdir, beyond))
    problems = {p.key_path: p.message for p in caught.value.problems}
    assert list(problems) == [key_path], str(caught.value)
    assert message in problems[key_path]


def test_legacy_v1_values_are_bounded_under_their_v2_keys(write_config: Write) -> None:
    path = write_config(
        f"""\
        authorName: someone
        trainingServicePlatform: local
        searchSpacePath: search_space.json
        trialConcurrency: {2**70}
        maxTrialNum: {2**63}
        maxExecDuration: 1e308s
        trial:
          command: python3 trial.py
          codeDir: code
          gpuNum: 1
        localConfig:
          maxTrialNumPerGpu: 5000
        tuner:
          builtinTunerName: TPE
        """
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = {p.key_path: p.message for p in caught.value.problems}
    assert set(problems) == {
        "trialConcurrency",
        "maxTrialNumber",
        "maxExperimentDuration",
        "trainingService.maxTrialNumberPerGpu",
    }, str(caught.value)
    assert "at most 10000" in problems["trialConcurrency"]
    assert "at most 3650d (ten years), got '1e308s'" in problems["maxExperimentDuration"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "trial_concurrency",
            2**70,
            "trialConcurrency: expected a number at most 10000, got 1180591620717411303424",
        ),
        ("max_trial_number", 2**63, "maxTrialNumber: expected a number at most 1000000"),
        ("max_experiment_duration", 1e308, "maxExperimentDuration: expected a duration of at most 3650d"),
        ("max_experiment_duration", "1e400", "maxExperimentDuration: expected a duration such as"),
    ],
)
def test_updates_are_bounded_and_change_nothing(workdir: Path, field: str, value: Any, message: str) -> None:
    config = ExperimentConfig.from_dict(
        _config(workdir, {"maxTrialNumber": 10, "maxExperimentDuration": "1h"})
    )
    before = config.to_json()
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        config.updated(**{field: value})
    assert config.to_json() == before
    assert config.updated(**{field: 7}).to_json()[ExperimentConfig.model_fields[field].alias or field] == 7
