"""The Kubernetes platforms' NNI keys that trialfleet accepts without acting on them are each named in a warning
(docs/kubernetes.md, docs/nni-compatibility.md); the keys it acts on are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trialfleet.config import load_config

NFS = {"storageType": "nfs", "server": "10.20.30.40", "path": "/mnt/nfs/nni"}
ROLE = {"replicas": 1, "command": "python3 model.py", "gpuNumber": 0, "cpuNumber": 1, "memorySize": "4g"}
BLOCKS: dict[str, dict[str, Any]] = {
    "kubeflow": {
        "platform": "kubeflow",
        "operator": "pytorch-operator",
        "apiVersion": "v1",
        "storage": NFS,
        "master": ROLE | {"codeDirectory": "."},
        "worker": ROLE | {"replicas": 2, "dockerImage": "msranni/nni:latest"},
        "namespace": "nni",
    },
    "frameworkcontroller": {
        "platform": "frameworkcontroller",
        "storage": NFS,
        "serviceAccountName": "frameworkcontroller",
        "taskRoles": [
            {
                "name": "worker",
                "taskNumber": 2,
                "command": "python3 model.py",
                "gpuNumber": 0,
                "cpuNumber": 1,
                "memorySize": 1024,
                "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
            }
        ],
    },
}


def _warned(tmp_path: Path, block: dict[str, Any], **top: Any) -> list[str]:
    config = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCodeDirectory": ".",
        "trialConcurrency": 1,
        "tuner": {"name": "TPE"},
        "trainingService": block,
        **top,
    }
    path = tmp_path / "config.yml"
    path.write_text(json.dumps(config))
    return [w.split(":", 1)[0] for w in load_config(path).warnings if "accepted but not acted on" in w]


@pytest.mark.parametrize("platform", sorted(BLOCKS))
def test_the_keys_acted_on_are_not_warned_about(tmp_path: Path, platform: str) -> None:
    block = BLOCKS[platform]
    unacted = ["trainingService.master.codeDirectory"] if platform == "kubeflow" else []
    assert _warned(tmp_path, block) == unacted


@pytest.mark.parametrize("platform", sorted(BLOCKS))
def test_manager_ip_and_trial_gpus_are_named(tmp_path: Path, platform: str) -> None:
    block = BLOCKS[platform] | {"reuseMode": True, "trialGpuNumber": 1}
    warned = set(_warned(tmp_path, block, nniManagerIp="10.0.0.1"))
    assert "trainingService.trialGpuNumber" in warned
    assert warned & {"nniManagerIp", "trainingService.nniManagerIp"}


@pytest.mark.parametrize("platform", sorted(BLOCKS))
def test_reuse_mode_is_acted_on_and_on_by_default_as_in_nni(tmp_path: Path, platform: str) -> None:
    """Acted on (docs/reuse.md); for a job of several pods the service says at start why it is not."""
    block = BLOCKS[platform] | {"reuseMode": True, "workerIdleTimeout": "5m", "maxTrialNumberPerGpu": 2}
    assert "trainingService.reuseMode" not in _warned(tmp_path, block)
    path = tmp_path / "default.yml"
    config = {
        "searchSpace": {},
        "trialCodeDirectory": ".",
        "trialConcurrency": 1,
        "trainingService": BLOCKS[platform],
    }
    path.write_text(json.dumps(config | {"tuner": {"name": "TPE"}}))
    assert load_config(path).config.training_services[0].reuse_mode is True  # type: ignore[attr-defined]
