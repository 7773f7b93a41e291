"""The training-service contract, run against the Kubeflow platform on the emulated cluster: TFJob and PyTorchJob."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import code_copy, hard_kill, nfs_storage, start_cluster, trial_host

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.testing import TrainingServiceContract, TrialHost, make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.kubernetes.config import KubeflowConfig
from trialfleet.training_services.kubernetes.service import KubeflowTrainingService

ROLE = {"replicas": 1, "cpuNumber": 1, "memorySize": "512mb"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start_cluster(tmp_path)
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def kubeflow_config(root: Path, cluster: KubernetesEmulator, operator: str, **roles: Any) -> KubeflowConfig:
    data = {
        "trialCommand": "unused",  # the contract gives each trial its own command
        "kubeconfig": str(cluster.kubeconfig),
        "operator": operator,
        "apiVersion": "v1",
        "storage": nfs_storage(root),
        **roles,
    }
    return KubeflowConfig.model_validate(data)


class KubeflowContract(TrainingServiceContract):
    operator = ""
    roles: dict[str, Any] = {}

    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return KubeflowTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, cluster: KubernetesEmulator) -> ExperimentContext:
        config = kubeflow_config(tmp_path, cluster, self.operator, **self.roles)
        return make_context(tmp_path / "experiment", config)

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


class TestTFJobContract(KubeflowContract):
    operator = "tf-operator"
    roles = {"worker": ROLE}


class TestPyTorchJobContract(KubeflowContract):
    operator = "pytorch-operator"
    roles = {"master": ROLE}
