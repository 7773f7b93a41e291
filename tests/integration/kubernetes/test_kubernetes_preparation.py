"""Starting a Kubernetes platform: what it checks, and the messages when something is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from k8s_helpers import KF_ROLE, fc_config, kubeflow_config, nfs_storage, start_cluster, started

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.service import (
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)


async def test_a_missing_operator_is_named(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, operators=[])
    try:
        with pytest.raises(PlatformError, match=r"no Framework resources .*404.*install FrameworkController"):
            async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)):
                pass
        config = kubeflow_config(tmp_path, cluster, "pytorch-operator", master=KF_ROLE)
        with pytest.raises(PlatformError, match=r"PyTorchJob .*install the Kubeflow training operator"):
            async with started(KubeflowTrainingService, tmp_path, config):
                pass
    finally:
        cluster.stop()


async def test_a_missing_namespace_is_refused(tmp_path: Path, cluster: KubernetesEmulator) -> None:
    config = fc_config(tmp_path, cluster, namespace="nowhere")
    with pytest.raises(PlatformError, match='namespace "nowhere" does not exist'):
        async with started(FrameworkControllerTrainingService, tmp_path, config):
            pass


async def test_storage_not_mounted_here_is_refused(tmp_path: Path, cluster: KubernetesEmulator) -> None:
    storage = {key: value for key, value in nfs_storage(tmp_path).items() if key != "localMountPoint"}
    config = fc_config(tmp_path, cluster, storage=storage)
    message = "NFS export nfs.example:/exports is not mounted on this machine.*localMountPoint"
    with pytest.raises(PlatformError, match=message):
        async with started(FrameworkControllerTrainingService, tmp_path, config):
            pass


async def test_a_wrong_token_is_reported_with_the_servers_words(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    cluster.set_token("another-token")
    with pytest.raises(PlatformError, match="401 Unauthorized"):
        async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)):
            pass


async def test_an_old_api_version_falls_back_to_the_served_one(
    tmp_path: Path, cluster: KubernetesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """NNI's examples say v1alpha2; clusters today serve kubeflow.org/v1 only."""
    config = kubeflow_config(tmp_path, cluster, "tf-operator", apiVersion="v1alpha2", worker=KF_ROLE)
    with caplog.at_level(logging.WARNING):
        async with started(KubeflowTrainingService, tmp_path, config) as service:
            assert service.kind.version == "v1"
    assert "does not serve tfjobs.kubeflow.org at version v1alpha2; using v1" in caplog.text


async def test_start_installs_the_support_files_on_the_storage(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        assert service.storage.to_local(service.storage.layout.keeper).is_file()
        assert service.storage.to_local(service.entrypoint_script).is_file()
        assert service.entrypoint_script.startswith("/tmp/mount/nni/k8s/.trialfleet/entrypoint-")
        assert (tmp_path / "nfs" / "nni" / "k8s" / "trials").is_dir()
