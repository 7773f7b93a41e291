"""What the OpenPAI service checks at start, each failure one clear PlatformError, and what it prepares."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from openpai_helpers import openpai_block, openpai_config, openpai_context

from tests.emulators.openpai import OpenPAIEmulator
from trialfleet.errors import PlatformError
from trialfleet.testing import make_context
from trialfleet.training_services.openpai import OpenpaiConfig, OpenpaiTrainingService
from trialfleet.training_services.support import support_version


async def start_error(pai: OpenPAIEmulator, tmp_path: Path, **overrides: object) -> str:
    service = OpenpaiTrainingService(openpai_context(pai, tmp_path / "experiment", **overrides))
    service.client.retries = 0
    with pytest.raises(PlatformError) as caught:
        await service.start()
    return str(caught.value)


async def test_a_good_start_installs_the_support_bundle_and_copies_the_code(
    pai: OpenPAIEmulator, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    (code / "skipped").mkdir(parents=True)
    (code / "train.py").write_text("print(1)\n")
    (code / "skipped" / "big.bin").write_bytes(b"x")
    (code / ".nniignore").write_text("skipped/\n")
    service = OpenpaiTrainingService(
        openpai_context(pai, tmp_path / "experiment", trialCodeDirectory=str(code))
    )
    await service.start()
    await service.close()
    experiment = tmp_path / "nfs" / "contract"
    assert (experiment / ".trialfleet" / support_version() / "keeper" / "keeper.py").is_file()
    (copy,) = (experiment / "code").iterdir()
    assert sorted(p.name for p in copy.rglob("*")) == [".nniignore", "train.py"]
    asked = [(r["method"], r["path"].removeprefix("/rest-server/api/v2")) for r in pai.requests]
    assert asked == [("GET", "/info"), ("GET", "/virtual-clusters"), ("GET", "/storages/confignfs")]


async def test_a_refused_token(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    pai.expire_token(user="alice")
    message = await start_error(pai, tmp_path, token="not-a-token")
    assert message.startswith(f"openpai: {pai.url} refuses the token of alice:")
    assert "HTTP 401 UnauthorizedUserError: Your token is invalid." in message


async def test_another_user_s_token(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    message = await start_error(pai, tmp_path, token=pai.token("admin"))
    assert (
        message == "openpai: the token is admin's, not alice's: jobs would be admin's (set username: admin)"
    )


async def test_an_unknown_virtual_cluster(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    message = await start_error(pai, tmp_path, virtualCluster="gpu_a100")
    assert message == f"openpai: {pai.url} has no virtual cluster 'gpu_a100'; it has: default"


async def test_an_unknown_storage(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    message = await start_error(pai, tmp_path, storageConfigName="team-nfs")
    assert message.startswith(f"openpai: {pai.url} has no storage 'team-nfs' for alice (")
    assert "HTTP 404 NoStorageError: Storage team-nfs is not found." in message
    assert message.endswith("storageConfigName can be one of: confignfs")


async def test_an_unreachable_cluster(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    message = await start_error(pai, tmp_path, host=f"http://127.0.0.1:{port}")
    assert message.startswith(f"openpai: cannot reach http://127.0.0.1:{port} (the cluster's information):")


async def test_a_storage_mount_point_that_cannot_be_written(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    (tmp_path / "nfs" / "contract").write_text("a file where the experiment's directory goes")
    message = await start_error(pai, tmp_path)
    assert message.startswith(
        f"openpai: cannot write to the storage at localStorageMountPoint {tmp_path / 'nfs'}"
    )
    assert "is the storage mounted there, writable by this user?" in message


async def test_a_protocol_file_that_changed_since_the_config_was_loaded(
    pai: OpenPAIEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "job.yml"
    path.write_text("taskRoles:\n  main:\n    commands: [python3 train.py]\n")
    context = make_context(tmp_path / "experiment", openpai_config(pai, openpaiConfigFile=str(path)))
    path.write_text("taskRoles: {}\n")
    service = OpenpaiTrainingService(context)
    with pytest.raises(
        PlatformError, match=r"openpaiConfigFile\.taskRoles: the job protocol needs taskRoles"
    ):
        await service.start()


async def test_relay_settings_are_said_unused_when_the_storage_is_mounted_here(
    pai: OpenPAIEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    context = openpai_context(pai, tmp_path / "experiment", nniManagerIp="10.0.0.5", relayPort=9999)
    service = OpenpaiTrainingService(context)
    with caplog.at_level("WARNING", logger="trialfleet.training_services.openpai"):
        await service.start()
    await service.close()
    warned = [r.getMessage() for r in caplog.records]
    for key in ("nniManagerIp", "relayPort"):
        assert f"openpai: {key} is not used: trials report through the storage mounted here" in warned


async def test_without_the_storage_mounted_a_code_directory_too_big_to_carry_is_refused(
    pai: OpenPAIEmulator, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "weights.bin").write_bytes(os.urandom(150 * 1024))  # random bytes do not compress
    block = openpai_block(pai, trialCodeDirectory=str(code), relayPort=9999)
    del block["localStorageMountPoint"]
    service = OpenpaiTrainingService(
        make_context(tmp_path / "experiment", OpenpaiConfig.model_validate(block))
    )
    with pytest.raises(PlatformError) as caught:
        await service.start()
    message = str(caught.value)
    assert message.startswith(
        f"openpai: without localStorageMountPoint every job carries trialfleet's support files and the code "
        f"directory {code} in its protocol: "
    )
    assert (
        "KB, over the 100 KB OpenPAI takes; mount the storage here and set localStorageMountPoint" in message
    )
    assert not (tmp_path / "experiment" / "relay-secret").exists()  # nothing started
