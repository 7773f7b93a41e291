"""Pod volumes as directories of this machine, bind-mounted at the container's ``mountPath``.

Storage the cluster would reach over the network is a host directory chosen by configuration:
- ``nfs {server, path}``: ``nfs_exports["server:/export"]`` (the longest export that contains ``path``;
  a sub-directory of an export is that directory under it), else ``nfs_root/<server>/<path>``;
- ``azureFile {secretName, shareName}``: ``azure_shares[share]``, else ``azure_root/<share>``; the secret
  (with ``azurestorageaccountname`` and ``azurestorageaccountkey``) must exist, as the CSI driver needs it;
- ``persistentVolumeClaim {claimName}``: the directory the claim was bound to (``pvc_root/<ns>/<claim>``);
- ``configMap``/``secret``/``downwardAPI``/``projected``: files written for the pod (``defaultMode``
  honoured, ``items`` mapping keys to paths), mounted read-only;
- ``emptyDir``: a directory of the pod, gone with it; ``hostPath``: that path.
A volume that cannot be set up leaves the container in ``ContainerCreating`` with a ``FailedMount`` event
worded as the kubelet words it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..container import Mount

SecretLookup = Callable[[str, str, str], "dict[str, Any] | None"]  # (plural, namespace, name) → object


class VolumeError(Exception):
    """A volume the kubelet cannot mount; the message is the FailedMount event's."""


@dataclass
class VolumeHost:
    state_dir: Path
    nfs_exports: Mapping[str, Path] = field(default_factory=dict)
    nfs_root: Path | None = None
    azure_shares: Mapping[str, Path] = field(default_factory=dict)
    azure_root: Path | None = None
    pvc_root: Path | None = None

    def claim_dir(self, namespace: str, claim: str) -> Path:
        root = self.pvc_root if self.pvc_root is not None else self.state_dir / "pvc"
        return root / namespace / claim

    def nfs_dir(self, server: str, export: str) -> Path:
        wanted = "/" + export.strip("/")
        best: tuple[int, Path] | None = None
        for key, directory in self.nfs_exports.items():
            host, _, prefix = key.partition(":")
            prefix = "/" + prefix.strip("/")
            inside = wanted == prefix or wanted.startswith(prefix.rstrip("/") + "/")
            if host == server and inside and (best is None or len(prefix) > best[0]):
                rest = wanted[len(prefix) :].strip("/")
                best = (len(prefix), Path(directory) / rest if rest else Path(directory))
        if best is not None:
            best[1].mkdir(parents=True, exist_ok=True)
            return best[1]
        if self.nfs_root is None:
            raise VolumeError(
                f"mount failed: exit status 32\nMounting command: mount\nMounting arguments: -t nfs "
                f"{server}:{export}\nOutput: mount.nfs: Connection timed out"
            )
        directory = self.nfs_root / server / export.strip("/")
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def azure_dir(self, share: str) -> Path:
        if share in self.azure_shares:
            return Path(self.azure_shares[share])
        if self.azure_root is None:
            raise VolumeError(
                f"mount failed: exit status 32\nOutput: mount error(2): No such file or directory "
                f"(share {share!r} does not exist)"
            )
        directory = self.azure_root / share
        directory.mkdir(parents=True, exist_ok=True)
        return directory


def pod_mounts(
    host: VolumeHost,
    pod: dict[str, Any],
    container: dict[str, Any],
    pod_dir: Path,
    lookup: SecretLookup,
    service_account: dict[str, str],
) -> list[Mount]:
    """The container's mounts; raises :class:`VolumeError` for a volume that cannot be set up."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        source, read_only = _volume_dir(host, pod, volume, pod_dir, lookup, service_account)
        sub = mount.get("subPath") or ""
        if sub:
            source = source / sub
            if not source.exists():
                source.mkdir(parents=True)
        mounts.append(Mount(source, mount["mountPath"], read_only or bool(mount.get("readOnly"))))
    return mounts


def _volume_dir(
    host: VolumeHost,
    pod: dict[str, Any],
    volume: dict[str, Any],
    pod_dir: Path,
    lookup: SecretLookup,
    service_account: dict[str, str],
) -> tuple[Path, bool]:
    name = volume["name"]
    namespace = pod["metadata"]["namespace"]
    here = pod_dir / "volumes" / name
    if "nfs" in volume:
        return host.nfs_dir(volume["nfs"]["server"], volume["nfs"]["path"]), bool(
            volume["nfs"].get("readOnly")
        )
    if "azureFile" in volume:
        source = volume["azureFile"]
        secret_ns = source.get("secretNamespace") or namespace
        secret = lookup("secrets", secret_ns, source["secretName"])
        data = (secret or {}).get("data") or {}
        if secret is None or "azurestorageaccountname" not in data or "azurestorageaccountkey" not in data:
            raise VolumeError(
                f'MountVolume.SetUp failed for volume "{name}" : Couldn\'t get secret '
                f"{secret_ns}/{source['secretName']}"
            )
        return host.azure_dir(source["shareName"]), bool(source.get("readOnly"))
    if "persistentVolumeClaim" in volume:
        claim = volume["persistentVolumeClaim"]["claimName"]
        pvc = lookup("persistentvolumeclaims", namespace, claim)
        if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound":
            raise VolumeError(f'persistentvolumeclaim "{claim}" not found')
        directory = host.claim_dir(namespace, claim)
        directory.mkdir(parents=True, exist_ok=True)
        return directory, bool(volume["persistentVolumeClaim"].get("readOnly"))
    if "emptyDir" in volume:
        here.mkdir(parents=True, exist_ok=True)
        return here, False
    if "hostPath" in volume:
        path = Path(volume["hostPath"]["path"])
        if volume["hostPath"].get("type") in ("DirectoryOrCreate",) and not path.exists():
            path.mkdir(parents=True)
        if not path.exists():
            raise VolumeError(
                f'MountVolume.SetUp failed for volume "{name}" : hostPath type check failed: {path} is not a directory'
            )
        return path, False
    files = _projected_files(volume, pod, lookup, service_account)
    _write_files(here, files)
    return here, True


def _projected_files(
    volume: dict[str, Any], pod: dict[str, Any], lookup: SecretLookup, service_account: dict[str, str]
) -> list[tuple[str, bytes, int]]:
    namespace = pod["metadata"]["namespace"]
    if "configMap" in volume:
        return _keyed(
            volume["configMap"],
            lookup("configmaps", namespace, volume["configMap"].get("name", "")),
            "configmap",
            volume["name"],
            decode=False,
        )
    if "secret" in volume:
        return _keyed(
            volume["secret"],
            lookup("secrets", namespace, volume["secret"].get("secretName", "")),
            "secret",
            volume["name"],
            decode=True,
            name_key="secretName",
        )
    if "downwardAPI" in volume:
        from .podenv import field_value

        mode = volume["downwardAPI"].get("defaultMode", 420)
        return [
            (item["path"], field_value(pod, item["fieldRef"]["fieldPath"]).encode(), item.get("mode", mode))
            for item in volume["downwardAPI"].get("items") or []
            if "fieldRef" in item
        ]
    if "projected" in volume:
        mode = volume["projected"].get("defaultMode", 420)
        return [(name, text.encode(), mode) for name, text in service_account.items()]
    raise VolumeError(
        f'MountVolume.SetUp failed for volume "{volume["name"]}" : volume type not supported by the emulator'
    )


def _keyed(
    source: dict[str, Any],
    obj: dict[str, Any] | None,
    what: str,
    volume: str,
    *,
    decode: bool,
    name_key: str = "name",
) -> list[tuple[str, bytes, int]]:
    if obj is None:
        if source.get("optional"):
            return []
        raise VolumeError(
            f'MountVolume.SetUp failed for volume "{volume}" : {what} "{source.get(name_key)}" not found'
        )
    data = {k: base64.b64decode(v) if decode else str(v).encode() for k, v in (obj.get("data") or {}).items()}
    if not decode:
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    mode = source.get("defaultMode", 420)
    items = source.get("items")
    if not items:
        return [(key, value, mode) for key, value in data.items()]
    files = []
    for item in items:
        if item["key"] not in data:
            raise VolumeError(
                f'MountVolume.SetUp failed for volume "{volume}" : configmap references non-existent '
                f"config key: {item['key']}"
            )
        files.append((item["path"], data[item["key"]], item.get("mode", mode)))
    return files


def _write_files(directory: Path, files: list[tuple[str, bytes, int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for relative, content, mode in files:
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            os.chmod(target, 0o600)
        target.write_bytes(content)
        os.chmod(target, mode)
