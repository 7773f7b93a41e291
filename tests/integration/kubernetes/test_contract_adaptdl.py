"""The training-service contract, run against the AdaptDL platform on the emulated cluster."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import (
    CONTAINER_ROOT,
    NFS_EXPORT,
    NFS_SERVER,
    code_copy,
    hard_kill,
    start_cluster,
    trial_host,
)

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.testing import TrainingServiceContract, TrialHost, make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.kubernetes.config import AdlConfig
from trialfleet.training_services.kubernetes.service import AdlTrainingService


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start_cluster(tmp_path)
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def adl_config(root: Path, cluster: KubernetesEmulator, **fields: Any) -> AdlConfig:
    nfs = {"server": NFS_SERVER, "path": NFS_EXPORT, "containerMountPath": CONTAINER_ROOT}
    data = {
        "trialCommand": "unused",  # the contract gives each trial its own command
        "kubeconfig": str(cluster.kubeconfig),
        "image": "registry.example.org/trial:latest",
        "nfs": {**nfs, "localMountPoint": str(root / "nfs")},
        "cpuNumber": 1,
        "memorySize": "512Mi",
        **fields,
    }
    return AdlConfig.model_validate(data)


class TestAdaptDLContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return AdlTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, cluster: KubernetesEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", adl_config(tmp_path, cluster))

    @pytest.fixture
    def hard_kill(self, tmp_path: Path) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        return hard_kill(tmp_path)

    @pytest.fixture
    def control(self, tmp_path: Path) -> TrialHost:
        return trial_host(tmp_path)

    @pytest.fixture
    def python_command(self) -> str:
        return "python3"  # the image's

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        return code_copy("contract", code_dir)
