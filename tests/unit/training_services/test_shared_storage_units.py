"""Shared storage as data: the mount commands NNI's users know, the key sources, the manager-side mount."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trialfleet.config.experiment import ExperimentConfig
from trialfleet.config.shared_storage import AzureBlobConfig, NfsConfig
from trialfleet.errors import ConfigError, PlatformError
from trialfleet.training_services.shared_storage import (
    MOUNT_POINT,
    SharedStorage,
    key_vault_argv,
    mount_command,
)
from trialfleet.trial_keeper import probe


def nfs(**overrides: Any) -> NfsConfig:
    data = {"nfsServer": "10.0.0.5", "exportedDirectory": "/srv/nfs/exp data", "localMountPoint": "/mnt/here",
            "remoteMountPoint": "/mnt/there", "localMounted": "usermount", **overrides}  # fmt: skip
    return NfsConfig.model_validate(data)


def blob(**overrides: Any) -> AzureBlobConfig:
    data = {"storageAccountName": "acct", "containerName": "box", "localMountPoint": "/mnt/here",
            "remoteMountPoint": "/mnt/there", "localMounted": "usermount", **overrides}  # fmt: skip
    return AzureBlobConfig.model_validate(data)


def test_nfs_mount_command() -> None:
    command = mount_command(nfs(), "/mnt/there")
    assert command.argv == ["mount", "-t", "nfs", "10.0.0.5:/srv/nfs/exp data", MOUNT_POINT]
    assert command.env == {} and command.what == "NFS 10.0.0.5:/srv/nfs/exp data"


def test_blobfuse2_command_keeps_the_key_out_of_argv() -> None:
    command = mount_command(blob(storageAccountKey="k3y"), "/mnt/there", "k3y")
    tmp = command.dirs[0]
    assert tmp.startswith("/tmp/trialfleet-blobfuse2/acct-box-")
    assert command.argv == [
        "blobfuse2", "mount", MOUNT_POINT, "--container-name=box", f"--tmp-path={tmp}",
        "--allow-other", "--attr-timeout=240", "--entry-timeout=240", "--negative-timeout=120",
    ]  # fmt: skip
    assert command.env == {"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_AUTH_TYPE": "key",
                           "AZURE_STORAGE_ACCESS_KEY": "k3y"}  # fmt: skip
    assert "k3y" not in repr(command)


def test_key_vault_command() -> None:
    config = blob(keyVaultName="vault", keyVaultKey="secret-name")
    assert key_vault_argv(config) == ["az", "keyvault", "secret", "show", "--vault-name", "vault",
                                      "--name", "secret-name", "--query", "value", "--output", "tsv"]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({}, "storageAccountKey"),
        ({"keyVaultName": "v"}, "keyVaultKey"),
        ({"storageAccountKey": "k", "keyVaultName": "v", "keyVaultKey": "s"}, "storageAccountKey: give"),
        ({"storageAccountKey": "k", "localMounted": "nomount"}, "localMounted"),
    ],
)
def test_azure_blob_needs_exactly_one_key_source_and_a_local_mount(
    overrides: dict[str, str], problem: str
) -> None:
    storage = {"storageType": "AzureBlob", "storageAccountName": "a", "containerName": "c",
               "localMountPoint": "/tmp", "remoteMountPoint": "/x", "localMounted": "usermount", **overrides}  # fmt: skip
    experiment = {"searchSpace": {}, "trialCommand": "x", "trialConcurrency": 1, "tuner": {"name": "Random"},
                  "trainingService": {"platform": "local"}, "sharedStorage": storage}  # fmt: skip
    with pytest.raises(ConfigError) as error:
        ExperimentConfig.from_dict(experiment)
    assert f"sharedStorage.{problem}" in str(error.value)


def test_the_account_key_is_a_secret() -> None:
    config = blob(storageAccountKey="k3y")
    assert "k3y" not in repr(config) and "k3y" not in config.model_dump_json()


def test_mount_points_are_read_with_their_escapes() -> None:
    assert probe.unescape_mount_path("/tmp/remote\\040mount\\134x") == "/tmp/remote mount\\x"
    assert "/" in probe.mount_points()


def test_usermount_needs_the_directory(tmp_path: Path) -> None:
    storage = SharedStorage(nfs(localMountPoint=str(tmp_path / "absent")), "exp1")
    with pytest.raises(PlatformError, match=r"localMountPoint .*absent is not a directory"):
        run(storage.prepare_here())


def test_the_code_is_copied_once_below_nnis_layout(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)")
    (tmp_path / "mnt").mkdir()
    storage = SharedStorage(nfs(localMountPoint=str(tmp_path / "mnt")), "exp1")
    run(storage.prepare_here())
    relative = run(storage.code_dir(code))
    assert relative.startswith("nni/exp1/code/")
    assert (tmp_path / "mnt" / relative / "train.py").read_text() == "print(1)"
    assert run(storage.code_dir(code)) == relative
    request = storage.worker_request()
    assert request["mount_point"] == "/mnt/there" and request["expect"] == "nni/exp1"
    json.dumps(request)  # what goes to the probe is plain JSON


def run(awaitable: Any) -> Any:
    import asyncio

    return asyncio.run(awaitable)
