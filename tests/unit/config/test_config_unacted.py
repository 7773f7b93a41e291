"""A key trialfleet accepts but does not act on is named in a warning, where the user wrote it; never silent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trialfleet.config import load_config
from trialfleet.config.pipeline import unacted_warnings

BASE = """\
searchSpaceFile: search_space.json
trialCommand: python3 trial.py
trialCodeDirectory: code
trialConcurrency: 1
tuner:
  name: Random
"""


def test_keys_not_acted_on_are_each_named_once(write_config: Callable[[str], Path]) -> None:
    path = write_config(
        BASE
        + """\
nniManagerIp: 10.0.0.1
tunerGpuIndices: 0
trainingService:
  platform: remote
  reuse_mode: true  # acted on: a runner per host
  machineList: [{host: h, user: u, password: p}]
"""
    )
    warnings = load_config(path).warnings
    assert [w.split(":", 1)[0] for w in warnings] == ["tunerGpuIndices", "nniManagerIp"]
    assert all("accepted but not acted on" in w for w in warnings)


def test_keys_acted_on_give_no_warning(write_config: Callable[[str], Path]) -> None:
    path = write_config(
        BASE
        + """\
debug: true
logLevel: trace
maxTrialRetries: 2
trainingService:
  platform: local
  debug: true
  useActiveGpu: true
"""
    )
    loaded = load_config(path)
    assert loaded.warnings == []
    assert unacted_warnings(loaded.config) == []


def test_the_manager_can_name_them_from_a_stored_config(write_config: Callable[[str], Path]) -> None:
    path = write_config(
        BASE + "sharedStorage:\n  storageType: AzureBlob\n  localMountPoint: code\n"
        "  remoteMountPoint: /mnt/blob\n  localMounted: usermount\n  storageAccountName: a\n"
        "  storageAccountKey: k\n  containerName: c\ntrainingService:\n  platform: aml\n"
        "  subscriptionId: s\n  resourceGroup: g\n  workspaceName: w\n  computeTarget: c\n"
    )
    config = load_config(path).config
    [warning] = unacted_warnings(config)
    assert warning.startswith("sharedStorage: accepted but not acted on: aml trials get the code directory")


def test_shared_storage_is_acted_on_by_local_remote_and_slurm(write_config: Callable[[str], Path]) -> None:
    storage = (
        "sharedStorage:\n  storageType: NFS\n  localMountPoint: code\n  remoteMountPoint: /mnt/nfs\n"
        "  localMounted: usermount\n  nfsServer: 10.0.0.1\n  exportedDirectory: /export\n"
    )
    for service in (
        "  platform: local\n",
        "  platform: remote\n  machineList: [{host: h, user: u, password: p}]\n",
        "  platform: slurm\n  sharedDirectory: code\n",
    ):
        loaded = load_config(write_config(BASE + storage + "trainingService:\n" + service))
        assert loaded.warnings == [], service
