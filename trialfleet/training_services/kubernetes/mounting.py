"""This machine's mount of the storage: found in the mount table, or mounted here as NNI's services did.

NNI's Kubernetes services ran ``sudo mount <server>:<path> <experiment dir>/trials-nfs-tmp`` at start and
``sudo umount`` at the end (``kubernetesTrainingService.ts``, ``createNFSStorage``). trialfleet first looks for a
mount of the export this machine has already (:func:`.storage.local_mount_point`, or ``localMountPoint``); when
there is none, it mounts the export at the same place with the probe's ``mount`` (as ``sharedStorage``'s
``nnimount`` does: ``sudo -n`` unless root), and unmounts it when the experiment stops. A mount that fails is
reported with the command, its exit code and its own words.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.storage import StorageSpec, local_mount_point
from trialfleet.training_services.shared_storage import MOUNT_POINT, MOUNT_TIMEOUT, run_local_probe

log = logging.getLogger(__name__)

NFS_MOUNT_DIR = "trials-nfs-tmp"  # NNI's mount point, in the experiment's directory


@dataclass(frozen=True)
class LocalMount:
    point: Path
    ours: bool  # mounted by this experiment (at its NFS_MOUNT_DIR): unmounted when it stops


def nfs_mount_request(spec: StorageSpec, point: Path) -> dict[str, object]:
    """The probe's ``mount`` request for the storage's NFS export at ``point``."""
    assert spec.nfs is not None
    server, path = spec.nfs
    return {
        "mount_point": str(point),
        "argv": ["mount", "-t", "nfs", f"{server}:{path}", MOUNT_POINT],
        "env": {},
        "hide": [],
        "dirs": [],
        "expect": None,
        "timeout": MOUNT_TIMEOUT,
    }


async def mount_storage(platform: str, spec: StorageSpec, experiment_dir: Path) -> LocalMount:
    """Where this machine sees the storage, mounting an NFS export that is not mounted yet."""
    found = await asyncio.to_thread(local_mount_point, platform, spec)
    if found is not None:
        return LocalMount(found, ours=False)
    point = experiment_dir / NFS_MOUNT_DIR
    answer = await run_local_probe("mount", nfs_mount_request(spec, point))
    if answer["status"] == "failed":
        command = " ".join(answer.get("argv") or [])
        raise PlatformError(
            f"{platform}: the {spec.description} is not mounted on this machine, which reads the trials' files "
            f"there, and mounting it at {point} failed: {command} exited with {answer['exit']}: "
            f"{answer['output'] or '(no output)'}. Mount it yourself, or give its mount point as "
            "storage.localMountPoint"
        )
    log.info("%s: %s %s at %s", platform, answer["status"], spec.description, point)
    return LocalMount(Path(answer["mount_point"]), ours=True)


async def unmount(platform: str, mount: LocalMount) -> None:
    """Unmount what this experiment mounted (NNI's ``sudo umount``); a failure is logged, not raised."""
    if not mount.ours:
        return
    argv = ["umount", str(mount.point)]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), MOUNT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        log.warning("%s: cannot unmount %s: %s", platform, mount.point, exc)
        return
    if process.returncode != 0:
        text = output.decode("utf-8", "replace").strip()
        log.warning("%s: %s exited with %s: %s", platform, " ".join(argv), process.returncode, text)
