"""What the Kubernetes platforms' tests share: an emulated cluster with an NFS export, configs pointing at it,
and the trials' side of the contract suite (their control directory, as containers see it, on the export)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import start
from trialfleet.testing import TrialHost, wait_until_gone
from trialfleet.training_services.mounted_storage import code_copy_name

NFS_SERVER, NFS_EXPORT = "nfs.example", "/exports"
CONTAINER_ROOT = "/tmp/mount"  # where pods mount the storage (NNI's CONTAINER_MOUNT_PATH)


def start_cluster(root: Path, **options: Any) -> KubernetesEmulator:
    """An emulated cluster whose NFS export ``nfs.example:/exports`` is the directory ``root/nfs``."""
    (root / "nfs").mkdir(parents=True, exist_ok=True)
    options.setdefault("nfs_exports", {f"{NFS_SERVER}:{NFS_EXPORT}": root / "nfs"})
    return start(root / "k8s", **options)


def nfs_storage(root: Path) -> dict[str, Any]:
    return {
        "storageType": "nfs",
        "server": NFS_SERVER,
        "path": NFS_EXPORT,
        "localMountPoint": str(root / "nfs"),
    }


def local_path(root: Path, container_path: str) -> Path:
    """This machine's path of a path pods see on the storage."""
    return root / "nfs" / Path(container_path).relative_to(CONTAINER_ROOT)


def trial_host(root: Path) -> TrialHost:
    """The contract's control directory on the export: containers see it below /tmp/mount."""
    local = root / "nfs" / "control"
    local.mkdir(parents=True, exist_ok=True)
    return TrialHost(local, f"{CONTAINER_ROOT}/control")


def code_copy(experiment_id: str, code_dir: Path) -> str:
    """Where pods find a code directory of this machine: its copy on the storage."""
    return f"{CONTAINER_ROOT}/nni/{experiment_id}/code/{code_copy_name(code_dir.resolve())}"


def hard_kill(root: Path) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
    """SIGKILL a trial's keeper and its process group, as a crashed node would (the emulator runs containers
    as processes of this machine)."""

    async def kill(handle: Mapping[str, Any]) -> None:
        keeper = json.loads((local_path(root, handle["trial_dir"]) / "keeper.json").read_text())
        os.kill(keeper["keeper_pid"], signal.SIGKILL)
        os.killpg(keeper["pgid"], signal.SIGKILL)
        await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

    return kill
