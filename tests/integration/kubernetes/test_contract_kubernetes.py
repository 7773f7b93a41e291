"""The training-service contract, run against every Kubernetes platform on the emulated cluster: Kubeflow's TFJob
and PyTorchJob, FrameworkController and AdaptDL.

Trials run in pods that the emulator's kubelet starts as processes of this machine, in private mount namespaces
where the NFS export is bind-mounted at /tmp/mount: the control directory and the code copy are seen there, as
in a real container, while the test reads them at their place below ``tmp_path/nfs``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from k8s_helpers import KF_ROLE, adl_config, code_copy, fc_config, hard_kill, kubeflow_config, trial_host

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.testing import TrainingServiceContract, TrialHost, make_context
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.kubernetes.service import (
    AdlTrainingService,
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)
from trialfleet.training_services.spec import Submitted, TrialSpec


class KubernetesContract(TrainingServiceContract):
    service: ClassVar[type[TrainingService]]

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        raise NotImplementedError

    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return self.service

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, cluster: KubernetesEmulator) -> ExperimentContext:
        return make_context(tmp_path / "experiment", self.config(tmp_path, cluster))

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


class TestFrameworkControllerContract(KubernetesContract):
    service = FrameworkControllerTrainingService

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return fc_config(root, cluster)


class TestTFJobContract(KubernetesContract):
    service = KubeflowTrainingService

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return kubeflow_config(root, cluster, "tf-operator", worker=KF_ROLE)


class TestPyTorchJobContract(KubernetesContract):
    service = KubeflowTrainingService

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return kubeflow_config(root, cluster, "pytorch-operator", master=KF_ROLE)


class TestAdaptDLContract(KubernetesContract):
    service = AdlTrainingService

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return adl_config(root, cluster)


class InWorkers(KubernetesContract):
    """Reuse mode: every trial the suite submits is given to a worker (the suite would pass without reuse too)."""

    @staticmethod
    async def submit(service: TrainingService, spec: TrialSpec) -> Submitted:
        submitted = await KubernetesContract.submit(service, spec)
        assert "worker" in submitted.handle, f"not given to a worker: {submitted.handle}"
        return submitted


class TestFrameworkControllerReuseContract(InWorkers, TestFrameworkControllerContract):
    """The same contract in reuse mode (NNI's default on FrameworkController): each trial, run by a long-lived
    worker Framework, keeps every guarantee of a trial that has a Framework of its own."""

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return fc_config(root, cluster, reuseMode=True)


class TestTFJobReuseContract(InWorkers, TestTFJobContract):
    """The contract in reuse mode on Kubeflow (NNI's default there): trials in a worker TFJob of one replica."""

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return kubeflow_config(root, cluster, "tf-operator", worker=KF_ROLE, reuseMode=True)


class TestPyTorchJobReuseContract(InWorkers, TestPyTorchJobContract):
    """The contract in reuse mode on Kubeflow's PyTorchJob: trials in a worker of one master replica."""

    def config(self, root: Path, cluster: KubernetesEmulator) -> TrainingServiceConfig:
        return kubeflow_config(root, cluster, "pytorch-operator", master=KF_ROLE, reuseMode=True)
