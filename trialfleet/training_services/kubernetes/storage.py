"""The storage trials keep their files on: a volume every pod mounts, which this machine mounts too.

An NFS export, an Azure file share or (trialfleet) a PersistentVolumeClaim. Pods mount it at NNI's container
path, ``/tmp/mount`` (AdaptDL: ``nfs.containerMountPath``); this machine at ``localMountPoint``, or wherever the
mount table (``/proc/self/mountinfo``) shows a mount of that export or share. Below it, as NNI did, everything
of an experiment is in ``nni/<experiment id>/``, laid out by :class:`~..mounted_storage.MountedStorage`.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.config import (
    AdlNfsConfig,
    K8sAzureStorageConfig,
    K8sNfsConfig,
    K8sPvcConfig,
)
from trialfleet.training_services.mounted_storage import MountedStorage

CONTAINER_MOUNT = "/tmp/mount"  # NNI's CONTAINER_MOUNT_PATH
NNI_DIR = "nni"
VOLUME_NAME = "nni-vol"
MOUNTINFO = Path("/proc/self/mountinfo")
ENTRYPOINT_SOURCE = Path(__file__).with_name("entrypoint.py")


@dataclass(frozen=True)
class StorageSpec:
    """One storage: how pods mount it, where, and how this machine recognises its own mount of it."""

    description: str  # "NFS export 10.0.0.1:/exports"
    volume: dict[str, Any]  # the pod volume's source, e.g. {"nfs": {"server": …, "path": …}}
    container_path: str
    local: Path | None  # localMountPoint, when the config gives it
    nfs: tuple[str, str] | None = None  # (server, path): matched against NFS mounts of this machine
    azure: tuple[str, str] | None = None  # (account, share): matched against SMB mounts
    secrets: list[str] = field(default_factory=list)  # Secrets the volume needs (Azure: the account key)


def azure_secret_name(account: str) -> str:
    return f"trialfleet-azurefile-{account.lower()}"


def storage_spec(storage: K8sNfsConfig | K8sAzureStorageConfig | K8sPvcConfig) -> StorageSpec:
    volume: dict[str, Any]
    if isinstance(storage, K8sNfsConfig):
        volume = {"nfs": {"server": storage.server, "path": storage.path}}
        where = f"NFS export {storage.server}:{storage.path}"
        return StorageSpec(
            where, volume, CONTAINER_MOUNT, storage.local_mount_point, nfs=(storage.server, storage.path)
        )
    if isinstance(storage, K8sAzureStorageConfig):
        secret = azure_secret_name(storage.azure_account)
        volume = {"azureFile": {"secretName": secret, "shareName": storage.azure_share, "readOnly": False}}
        where = f"Azure file share {storage.azure_account}/{storage.azure_share}"
        azure = (storage.azure_account, storage.azure_share)
        return StorageSpec(
            where, volume, CONTAINER_MOUNT, storage.local_mount_point, azure=azure, secrets=[secret]
        )
    volume = {"persistentVolumeClaim": {"claimName": storage.claim_name}}
    return StorageSpec(f"claim {storage.claim_name}", volume, CONTAINER_MOUNT, storage.local_mount_point)


def adl_storage_spec(nfs: AdlNfsConfig) -> StorageSpec:
    volume = {"nfs": {"server": nfs.server, "path": nfs.path}}
    where = f"NFS export {nfs.server}:{nfs.path}"
    return StorageSpec(
        where, volume, nfs.container_mount_path, nfs.local_mount_point, nfs=(nfs.server, nfs.path)
    )


# ---- this machine's side -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    root: str  # the directory of the mounted file system this mount shows
    mount_point: str
    fs_type: str
    source: str


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for escaped, plain in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(escaped, plain)
    return text


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        head, separator, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not separator or len(fields) < 5 or len(rest) < 2:
            continue
        mounts.append(Mount(_unescape(fields[3]), _unescape(fields[4]), rest[0], _unescape(rest[1])))
    return mounts


def _inside(path: str, prefix: str) -> str | None:
    """``path`` relative to ``prefix`` (POSIX, "" when equal), None when it is not below it."""
    path, prefix = "/" + path.strip("/"), "/" + prefix.strip("/")
    if path == prefix:
        return ""
    return path[len(prefix) :].lstrip("/") if path.startswith(prefix.rstrip("/") + "/") else None


def find_local_mount(spec: StorageSpec, mounts: Iterable[Mount]) -> Path | None:
    """Where this machine shows the storage: the mount of the export (or of a directory above the configured
    path) whose source is the storage, deepest first. Any file system type counts (NFS, or sshfs of the same
    directory); for Azure, an SMB mount of ``//<account>.file.core.windows.net/<share>``."""
    best: tuple[int, Path] | None = None
    for mount in mounts:
        found = _match(spec, mount)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    return best[1] if best is not None else None


def _match(spec: StorageSpec, mount: Mount) -> tuple[int, Path] | None:
    if spec.nfs is not None:
        server, path = spec.nfs
        host, colon, exported = mount.source.partition(":")
        if not colon or host != server or mount.root != "/":
            return None
        below = _inside(path, exported)
        return None if below is None else (len(exported), Path(mount.mount_point, below))
    if spec.azure is not None:
        account, share = spec.azure
        prefix = f"//{account}.file.core.windows.net/".lower()
        if not mount.source.lower().startswith(prefix) or mount.root != "/":
            return None
        mounted = mount.source[len(prefix) :].strip("/")
        return (0, Path(mount.mount_point)) if mounted == share else None
    return None


def local_mount_point(platform: str, spec: StorageSpec, mountinfo: Path = MOUNTINFO) -> Path | None:
    """This machine's mount point of the storage; None for an NFS export it does not mount (then it is mounted:
    :mod:`.mounting`), a PlatformError saying what to do for another storage it does not mount."""
    if spec.local is not None:
        if not spec.local.is_dir():
            raise PlatformError(
                f"{platform}: localMountPoint {spec.local} (the {spec.description}) is not a directory"
            )
        return spec.local
    try:
        found = find_local_mount(spec, parse_mountinfo(mountinfo.read_text()))
    except OSError as exc:
        raise PlatformError(f"{platform}: cannot read the mount table {mountinfo}: {exc}") from exc
    if found is None and spec.nfs is None:
        raise PlatformError(
            f"{platform}: the {spec.description} is not mounted on this machine, which reads the trials' files "
            "there: mount it or give its mount point as storage.localMountPoint"
        )
    return found


def experiment_storage(local: Path, spec: StorageSpec, experiment_id: str) -> MountedStorage:
    """``<mount>/nni/<experiment id>/`` as NNI kept it, on this machine and in the containers."""
    return MountedStorage(local / NNI_DIR, posixpath.join(spec.container_path, NNI_DIR), experiment_id)


def install_entrypoint(storage: MountedStorage) -> str:
    """Copy the containers' entry point next to the support bundle (named after its content); its container path."""
    source = ENTRYPOINT_SOURCE.read_bytes()
    name = f"entrypoint-{hashlib.sha256(source).hexdigest()[:16]}.py"
    remote = posixpath.join(storage.remote, ".trialfleet", name)
    target = storage.to_local(remote)
    if not target.exists():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = target.with_name(f"{name}.tmp.{os.getpid()}")
            staging.write_bytes(source)
            os.replace(staging, target)
        except OSError as exc:
            raise PlatformError(f"cannot write {target} on the shared storage: {exc}") from exc
    return remote
