"""The training-service contract, run against the FrameworkController platform on the emulated cluster.

Trials run in pods the emulator's kubelet starts as local processes, with the NFS export bind-mounted at
/tmp/mount: the control directory and the code copy are seen there, as in a real container.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import code_copy, hard_kill, nfs_storage, start_cluster, trial_host

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.testing import TrainingServiceContract, TrialHost, make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.kubernetes.config import FrameworkControllerConfig
from trialfleet.training_services.kubernetes.service import FrameworkControllerTrainingService

ROLE = {
    "name": "worker",
    "taskNumber": 1,
    "cpuNumber": 1,
    "memorySize": "512mb",
    "gpuNumber": 0,
    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start_cluster(tmp_path)
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def fc_config(root: Path, cluster: KubernetesEmulator, **fields: Any) -> FrameworkControllerConfig:
    data = {
        "trialCommand": "unused",  # the contract gives each trial its own command
        "kubeconfig": str(cluster.kubeconfig),
        "storage": nfs_storage(root),
        "taskRoles": [ROLE],
        **fields,
    }
    return FrameworkControllerConfig.model_validate(data)


class TestFrameworkControllerContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return FrameworkControllerTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, cluster: KubernetesEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", fc_config(tmp_path, cluster))

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
