"""Shared storage on real SSH hosts: the mount commands run on each host, trials read code and data there.

This machine's kernel has no NFS client and no blobfuse2, so a recording ``mount`` / ``blobfuse2`` is put first
on the hosts' PATH (``pythonPath``): it appends its argv (and the ``AZURE_STORAGE_*`` environment) to a file,
then bind-mounts the "export" directory at the mount point — inside that host's own mount namespace, which is
what an NFS mount looks like to a trial. From the test's namespace the hosts' mount points stay empty, so a
trial that reads its data there proves its host mounted the storage.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, Host
from remote_helpers import machines, remote_context

from trialfleet.errors import PlatformError
from trialfleet.status import TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.remote import RemoteTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

pytestmark = pytest.mark.ssh

RECORD = json.dumps(
    {"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
)
NFS_SERVER = "10.213.250.9"
ACCOUNT_KEY = "c2VjcmV0LWFjY291bnQta2V5PT0="
TRIAL = """
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
out = {"data": open(sys.argv[1]).read(), "version": open(os.path.join(here, "version.txt")).read(),
       "mount": sorted(os.listdir(sys.argv[2]))}
print(json.dumps(out))
"""
RECORDER = """#!/usr/bin/python3
import json, os, subprocess, sys
RECORDS, EXPORTS, FAIL, BIND = {records!r}, {exports!r}, {fail!r}, {bind!r}
name, args = os.path.basename(sys.argv[0]), sys.argv[1:]
host = (os.environ.get("SSH_CONNECTION") or "- - manager").split()[2]
env = {{k: v for k, v in os.environ.items() if k.startswith("AZURE_STORAGE")}}
with open(RECORDS, "a") as f:
    f.write(json.dumps({{"host": host, "argv": [name, *args], "env": env}}) + "\\n")
if FAIL:
    sys.stderr.write(FAIL.replace("KEY", env.get("AZURE_STORAGE_ACCESS_KEY", "")) + "\\n")
    sys.exit(32)
if name == "mount":
    source, target = args[-2], args[-1]
else:
    container = next(a.split("=", 1)[1] for a in args if a.startswith("--container-name="))
    source, target = env["AZURE_STORAGE_ACCOUNT"] + "/" + container, args[1]
if BIND:
    subprocess.run(["{real_mount}", "--bind", EXPORTS[source], target], check=True)
"""


class Recorder:
    """A directory of recording mount commands, and what they recorded."""

    def __init__(self, base: Path, exports: dict[str, Path], *, fail: str = "", bind: bool = True) -> None:
        self.bin = base / "bin"
        self.bin.mkdir(parents=True)
        self.records = base / "records.jsonl"
        real_mount = shutil.which("mount", path="/usr/sbin:/usr/bin:/sbin:/bin")
        script = RECORDER.format(
            records=str(self.records),
            exports={k: str(v) for k, v in exports.items()},
            fail=fail,
            bind=bind,
            real_mount=real_mount,
        )
        for name in ("mount", "blobfuse2"):
            (self.bin / name).write_text(script)
            (self.bin / name).chmod(0o755)

    def calls(self) -> list[dict[str, Any]]:
        if not self.records.exists():
            return []
        return [json.loads(line) for line in self.records.read_text().splitlines()]


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    """The exported directory, also the manager's mount point (usermount): it holds a data file."""
    export = tmp_path / "export"
    (export / "data").mkdir(parents=True)
    (export / "data" / "train.txt").write_text("rows 1 2 3")
    return export


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    (path / "trial.py").write_text(TRIAL)
    (path / "version.txt").write_text("code v7")
    return path


def nfs(storage: Path, remote_mount: Path, **overrides: str) -> dict[str, str]:
    return {
        "storageType": "NFS",
        "nfsServer": NFS_SERVER,
        "exportedDirectory": str(storage),
        "localMountPoint": str(storage),
        "remoteMountPoint": str(remote_mount),
        "localMounted": "usermount",
        **overrides,
    }


def trial_spec(trial_id: str, code_dir: Path, remote_mount: Path) -> TrialSpec:
    data = remote_mount / "data" / "train.txt"
    command = f"/usr/bin/python3 trial.py {shlex.quote(str(data))} {shlex.quote(str(remote_mount))}"
    return TrialSpec(trial_id, 0, command, code_dir, RECORD)


async def run_trials(
    service: RemoteTrainingService, fleet: Fleet, specs: list[TrialSpec]
) -> dict[str, dict[str, Any]]:
    """Each trial run to its end; what it printed, by the address of the host it ran on."""
    handles = {}
    for spec in specs:
        submitted = await service.submit(spec)
        assert isinstance(submitted, Submitted), submitted
        handles[spec.trial_id] = dict(submitted.handle)
    seen = await poll_until(service, lambda s: set(handles) <= set(s.ended))
    outputs = {}
    for trial_id, handle in handles.items():
        host = fleet.host_of(handle)
        stdout = host.local(posixpath.join(handle["trial_dir"], "trial.stdout")).read_text()
        assert seen.ended[trial_id].status is TrialStatus.SUCCEEDED, stdout
        outputs[host.address] = json.loads(stdout)
    return outputs


def machines_with(recorder: Recorder, hosts: list[Host]) -> list[Any]:
    return machines(hosts, pythonPath=str(recorder.bin))


async def test_nfs_is_mounted_on_every_host_and_trials_read_code_and_data_there(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path
) -> None:
    remote_mount = tmp_path / "remote mount"
    recorder = Recorder(tmp_path / "rec", {f"{NFS_SERVER}:{storage}": storage})
    context = remote_context(
        tmp_path / "e",
        fleet.hosts,
        machine_list=machines_with(recorder, fleet.hosts),
        trial_code_directory=code_dir,
        shared_storage=nfs(storage, remote_mount),
    )
    service = RemoteTrainingService(context)
    await service.start()
    try:
        outputs = await run_trials(
            service, fleet, [trial_spec(f"t{i}", code_dir, remote_mount) for i in range(3)]
        )
    finally:
        await service.close()

    expected = ["mount", "-t", "nfs", f"{NFS_SERVER}:{storage}", str(remote_mount)]
    assert sorted(c["host"] for c in host_calls(recorder)) == sorted(h.address for h in fleet.hosts)
    assert all(c["argv"] == expected for c in recorder.calls())
    assert set(outputs) == {h.address for h in fleet.hosts}  # one trial per host
    for output in outputs.values():
        assert output == {"data": "rows 1 2 3", "version": "code v7", "mount": ["data", "nni"]}
    # the code went once onto the storage, and to no host
    assert [p.name for p in (storage / "nni" / context.experiment_id / "code").iterdir()] != []
    for machine, host in zip(service.machines, fleet.hosts, strict=True):
        assert not host.local(posixpath.join(machine.root, "code")).exists()
    assert list(remote_mount.iterdir()) == []  # mounted in the hosts' namespaces only


def host_calls(recorder: Recorder) -> list[dict[str, Any]]:
    return [c for c in recorder.calls() if c["host"] != "manager"]


async def test_a_resumed_manager_finds_the_storage_mounted_and_does_not_mount_again(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path
) -> None:
    remote_mount = tmp_path / "remote mount"
    recorder = Recorder(tmp_path / "rec", {f"{NFS_SERVER}:{storage}": storage})
    options: dict[str, Any] = {
        "machine_list": machines_with(recorder, fleet.hosts[:1]),
        "trial_code_directory": code_dir,
        "shared_storage": nfs(storage, remote_mount),
        "experiment_id": "resumed-shared",
    }
    first = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1], **options))
    await first.start()
    await first.close()
    second = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1], **options))
    await second.start()
    try:
        outputs = await run_trials(second, fleet, [trial_spec("t0", code_dir, remote_mount)])
    finally:
        await second.close()
    assert len(recorder.calls()) == 1
    assert outputs[fleet.hosts[0].address]["data"] == "rows 1 2 3"


async def test_nnimount_mounts_on_the_manager_first(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote_mount = tmp_path / "remote mount"
    here = Recorder(tmp_path / "here", {}, bind=False)  # the export is this machine's directory already
    monkeypatch.setenv("PATH", f"{here.bin}:{os.environ['PATH']}")
    hosts = Recorder(tmp_path / "hosts", {f"{NFS_SERVER}:{storage}": storage})
    context = remote_context(
        tmp_path / "e",
        fleet.hosts[:1],
        machine_list=machines_with(hosts, fleet.hosts[:1]),
        trial_code_directory=code_dir,
        shared_storage=nfs(storage, remote_mount, localMounted="nnimount"),
    )
    service = RemoteTrainingService(context)
    await service.start()
    try:
        outputs = await run_trials(service, fleet, [trial_spec("t0", code_dir, remote_mount)])
    finally:
        await service.close()
    assert [c["argv"] for c in here.calls()] == [
        ["mount", "-t", "nfs", f"{NFS_SERVER}:{storage}", str(storage)]
    ]
    assert outputs[fleet.hosts[0].address]["version"] == "code v7"


async def test_a_failed_mount_stops_the_start_naming_each_host_and_the_output(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path
) -> None:
    refusal = f"mount.nfs: access denied by server while mounting {NFS_SERVER}:{storage}"
    recorder = Recorder(tmp_path / "rec", {}, fail=refusal)
    context = remote_context(
        tmp_path / "e",
        fleet.hosts[:2],
        machine_list=machines_with(recorder, fleet.hosts[:2]),
        trial_code_directory=code_dir,
        shared_storage=nfs(storage, tmp_path / "remote mount"),
    )
    service = RemoteTrainingService(context)
    with pytest.raises(PlatformError) as error:
        await service.start()
    await service.close()
    message = str(error.value)
    assert "2 of 2 machine(s) cannot be used" in message
    for host in fleet.hosts[:2]:
        assert f"root@{host.address}:22: mounting NFS {NFS_SERVER}:{storage} at" in message
    assert f"mount -t nfs {NFS_SERVER}:{storage}" in message and "exited with 32" in message
    assert message.count(refusal) == 2


async def test_a_mount_that_does_not_show_the_managers_storage_is_refused(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path
) -> None:
    elsewhere = tmp_path / "another export"
    elsewhere.mkdir()
    recorder = Recorder(tmp_path / "rec", {f"{NFS_SERVER}:{storage}": elsewhere})
    context = remote_context(
        tmp_path / "e",
        fleet.hosts[:1],
        machine_list=machines_with(recorder, fleet.hosts[:1]),
        trial_code_directory=code_dir,
        shared_storage=nfs(storage, tmp_path / "remote mount"),
    )
    service = RemoteTrainingService(context)
    with pytest.raises(
        PlatformError, match=r"is mounted at .* but the experiment's directory .* is not there"
    ):
        await service.start()
    await service.close()


def blob(container_dir: Path, remote_mount: Path, **key: str) -> dict[str, Any]:
    return {
        "storageType": "AzureBlob",
        "storageAccountName": "tfaccount",
        "containerName": container_dir.name,
        "localMountPoint": str(container_dir),
        "remoteMountPoint": str(remote_mount),
        "localMounted": "usermount",
        **key,
    }


async def test_azure_blob_runs_blobfuse2_with_the_key_in_its_environment_only(
    tmp_path: Path, fleet: Fleet, storage: Path, code_dir: Path
) -> None:
    remote_mount = tmp_path / "blob mount"
    recorder = Recorder(tmp_path / "rec", {f"tfaccount/{storage.name}": storage})
    context = remote_context(
        tmp_path / "e",
        fleet.hosts[:1],
        machine_list=machines_with(recorder, fleet.hosts[:1]),
        trial_code_directory=code_dir,
        shared_storage=blob(storage, remote_mount, storageAccountKey=ACCOUNT_KEY),
    )
    service = RemoteTrainingService(context)
    await service.start()
    try:
        outputs = await run_trials(service, fleet, [trial_spec("t0", code_dir, remote_mount)])
    finally:
        await service.close()
    [call] = recorder.calls()
    tmp = call["argv"][4]
    assert call["argv"] == [
        "blobfuse2", "mount", str(remote_mount), f"--container-name={storage.name}", tmp,
        "--allow-other", "--attr-timeout=240", "--entry-timeout=240", "--negative-timeout=120",
    ]  # fmt: skip
    assert tmp.startswith("--tmp-path=/tmp/trialfleet-blobfuse2/tfaccount-export-")
    assert call["env"] == {
        "AZURE_STORAGE_ACCOUNT": "tfaccount",
        "AZURE_STORAGE_ACCESS_KEY": ACCOUNT_KEY,
        "AZURE_STORAGE_AUTH_TYPE": "key",
    }
    assert outputs[fleet.hosts[0].address]["data"] == "rows 1 2 3"


async def test_azure_blob_key_from_a_key_vault_and_a_failure_that_hides_it(
    tmp_path: Path,
    fleet: Fleet,
    storage: Path,
    code_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    az = tmp_path / "az-bin"
    az.mkdir()
    (az / "az").write_text(
        f'#!/bin/sh\necho "$@" > {shlex.quote(str(tmp_path / "az-args"))}\necho {ACCOUNT_KEY}\n'
    )
    (az / "az").chmod(0o755)
    monkeypatch.setenv("PATH", f"{az}:{os.environ['PATH']}")
    recorder = Recorder(
        tmp_path / "rec", {}, fail="Error: failed to authenticate with key KEY: 403 Forbidden"
    )
    vault = {"keyVaultName": "tf-vault", "keyVaultKey": "blob-key"}
    context = remote_context(
        tmp_path / "e",
        fleet.hosts[:1],
        machine_list=machines_with(recorder, fleet.hosts[:1]),
        trial_code_directory=code_dir,
        shared_storage=blob(storage, tmp_path / "blob mount", **vault),
    )
    service = RemoteTrainingService(context)
    with caplog.at_level(logging.DEBUG), pytest.raises(PlatformError) as error:
        await service.start()
    await service.close()
    message = str(error.value)
    assert (tmp_path / "az-args").read_text().split() == [
        "keyvault", "secret", "show", "--vault-name", "tf-vault", "--name", "blob-key", "--query", "value",
        "--output", "tsv",
    ]  # fmt: skip
    assert recorder.calls()[0]["env"]["AZURE_STORAGE_ACCESS_KEY"] == ACCOUNT_KEY  # it reached blobfuse2
    assert f"root@{fleet.hosts[0].address}:22: mounting Azure Blob container tfaccount/export at" in message
    assert "blobfuse2 mount" in message and "failed to authenticate with key ******: 403 Forbidden" in message
    assert ACCOUNT_KEY not in message and ACCOUNT_KEY not in caplog.text
