"""Starting a Kubernetes platform: what it checks, and the messages when something is missing."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
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


def unmounted_storage(tmp_path: Path) -> dict[str, str]:
    return {key: value for key, value in nfs_storage(tmp_path).items() if key != "localMountPoint"}


async def test_an_export_that_cannot_be_mounted_is_reported_with_mounts_words(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    """The real ``mount -t nfs`` runs (as NNI's ``sudo mount`` did); here it fails (this kernel has no NFS
    client, or nfs.example does not resolve): the message names the export, the command and mount's words."""
    config = fc_config(tmp_path, cluster, storage=unmounted_storage(tmp_path))
    with pytest.raises(PlatformError) as error:
        async with started(FrameworkControllerTrainingService, tmp_path, config):
            pass
    point = tmp_path / "experiment" / "trials-nfs-tmp"
    message = str(error.value)
    assert message.startswith("frameworkcontroller: the NFS export nfs.example:/exports is not mounted on this")
    assert f"mounting it at {point} failed: " in message
    assert re.search(rf"(sudo -n )?mount -t nfs nfs.example:/exports {point} exited with \d+: \S", message)
    assert message.endswith("Mount it yourself, or give its mount point as storage.localMountPoint")
    assert point.is_dir() and point not in mount_points()


async def test_an_export_not_mounted_here_is_mounted_and_unmounted_at_the_end(
    tmp_path: Path, cluster: KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mount command trialfleet runs is the real ``mount``, with one stand-in: this kernel has no NFS client,
    so ``-t nfs nfs.example:/exports`` becomes a real bind mount of the emulated export's directory."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root (the stand-in for the NFS mount)")
    real = shutil.which("mount")
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "mount").write_text(
        "#!/bin/sh\n"
        f'if [ "$*" = "-t nfs nfs.example:/exports $4" ]; then exec {real} --bind {tmp_path / "nfs"} "$4"; fi\n'
        f'exec {real} "$@"\n'
    )
    (shims / "mount").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    point = tmp_path / "experiment" / "trials-nfs-tmp"
    config = fc_config(tmp_path, cluster, storage=unmounted_storage(tmp_path))
    try:
        async with started(FrameworkControllerTrainingService, tmp_path, config) as service:
            assert point in mount_points()
            assert service.storage.local == point / "nni" / "k8s"
            assert (tmp_path / "nfs" / "nni" / "k8s" / "trials").is_dir()  # written through the mount
    finally:
        if point in mount_points():
            subprocess.run(["umount", str(point)], check=False)
    assert point not in mount_points()  # unmounted when the experiment stopped, as NNI did


def mount_points() -> set[Path]:
    return {Path(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines()}


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
