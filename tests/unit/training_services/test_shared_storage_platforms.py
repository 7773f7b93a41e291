"""Shared storage on the local and Slurm platforms: trials take their code from the storage's copy.

The remote platform, where each host mounts the storage, is tested on real SSH hosts
(tests/integration/remote/test_shared_storage.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from slurm_fake_commands import FakeSlurm
from training_service_helpers import poll_until_ended, spec

from trialfleet.errors import PlatformError
from trialfleet.status import TrialStatus
from trialfleet.testing import make_context
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.local import LocalConfig, LocalTrainingService
from trialfleet.training_services.slurm import SlurmConfig, SlurmTrainingService
from trialfleet.training_services.slurm.runner import LocalCommandRunner
from trialfleet.training_services.spec import Submitted


def nfs(mount: Path, remote: str = "/mnt/cluster nfs") -> dict[str, Any]:
    return {"storageType": "NFS", "nfsServer": "10.0.0.5", "exportedDirectory": "/export",
            "localMountPoint": str(mount), "remoteMountPoint": remote, "localMounted": "usermount"}  # fmt: skip


@pytest.fixture
def code(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    (path / "where.py").write_text("import os\nprint(os.getcwd())\nprint(open('version.txt').read())\n")
    (path / "version.txt").write_text("v3")
    return path


async def test_local_trials_run_in_the_copy_on_the_storage(tmp_path: Path, code: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    config = LocalConfig(trial_command="unused", trial_code_directory=code)
    service = LocalTrainingService(
        make_context(tmp_path / "exp", config, "sharedexp", sharedStorage=nfs(mount))
    )
    await service.start()
    try:
        submitted = await service.submit(spec("t1", "python3 where.py", code))
        assert isinstance(submitted, Submitted)
        seen: dict[str, TrialEnded] = {}
        await poll_until_ended(service, {"t1"}, seen)
    finally:
        await service.close()
    assert seen["t1"].status is TrialStatus.SUCCEEDED
    cwd, version = (Path(submitted.handle["trial_dir"]) / "trial.stdout").read_text().splitlines()
    assert Path(cwd).parent == mount / "nni" / "sharedexp" / "code" and version == "v3"


async def test_slurm_jobs_take_the_code_from_the_nodes_mount_point(tmp_path: Path, code: Path) -> None:
    mount = tmp_path / "mnt"
    mount.mkdir()
    fake = FakeSlurm(
        tmp_path, scontrol="AccountingStorageType   = accounting_storage/none\n", squeue="", sbatch="99\n"
    )
    config = SlurmConfig(
        trial_command="unused", shared_directory=tmp_path / "shared", trial_code_directory=code
    )
    context = make_context(tmp_path / "exp", config, "sharedexp", sharedStorage=nfs(mount))
    service = SlurmTrainingService(context, runner=LocalCommandRunner(fake.env))
    await service.start()
    submitted = await service.submit(spec("t1", "python3 where.py", code))
    assert isinstance(submitted, Submitted)
    command = json.loads((Path(submitted.handle["trial_dir"]) / "command.json").read_text())
    copy = next((mount / "nni" / "sharedexp" / "code").iterdir())
    assert command["cwd"] == f"/mnt/cluster nfs/nni/sharedexp/code/{copy.name}"
    assert (copy / "version.txt").read_text() == "v3"
    assert not (tmp_path / "shared" / "sharedexp" / "code").exists()  # nothing copied to the job directory


async def test_slurm_needs_an_absolute_remote_mount_point(tmp_path: Path, code: Path) -> None:
    (tmp_path / "mnt").mkdir()
    fake = FakeSlurm(tmp_path, scontrol="AccountingStorageType   = accounting_storage/none\n")
    config = SlurmConfig(
        trial_command="unused", shared_directory=tmp_path / "shared", trial_code_directory=code
    )
    storage = nfs(tmp_path / "mnt", remote="data/nfs")
    service = SlurmTrainingService(
        make_context(tmp_path / "exp", config, "sharedexp", sharedStorage=storage),
        runner=LocalCommandRunner(fake.env),
    )
    with pytest.raises(PlatformError, match="remoteMountPoint must be an absolute path"):
        await service.start()
