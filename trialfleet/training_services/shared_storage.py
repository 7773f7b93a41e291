"""``sharedStorage``: one NFS export or Azure Blob container for the code (and the data) of every worker.

The manager's machine sees the storage at ``localMountPoint`` — mounted by the user (``usermount``) or by
trialfleet at start (``nnimount``) — and puts each code directory there once, below NNI's layout
``<mount point>/nni/<experiment id>/code/<digest>/`` (:class:`~.mounted_storage.MountedStorage`). Workers mount
the same storage at ``remoteMountPoint`` (remote hosts: at preparation, over SSH) and their trials take the code
from there: nothing is uploaded per host. A mount point where something is mounted already is used as it is, so
a resumed experiment, a second experiment or an administrator's own mount does not stack mounts.

Mounting is what NNI's users know: ``mount -t nfs <server>:<export> <point>`` and ``blobfuse2 mount <point>
--container-name=…``, with ``sudo -n`` first when not root. The Azure account key travels in the probe's request
(its stdin) and reaches ``blobfuse2`` through its environment (``AZURE_STORAGE_ACCESS_KEY``), never on a command
line; it is read from Azure Key Vault with the ``az`` CLI when the config names a vault instead.

Both ends run the probe's ``mount`` command (``trial_keeper/probe.py``): here as a local process, on a host over
SSH. A failure is a :class:`~trialfleet.errors.PlatformError` naming the machine, the command and its output.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import posixpath
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trialfleet.config.shared_storage import AzureBlobConfig, NfsConfig
from trialfleet.errors import PlatformError
from trialfleet.training_services.mounted_storage import MountedStorage
from trialfleet.training_services.support import PROBE_SCRIPT

EXPERIMENTS_DIR = "nni"  # NNI's layout: <mount point>/nni/<experiment id>/
MOUNT_POINT = "<mount point>"  # replaced by the probe with the absolute mount point (probe.MOUNT_POINT)
MOUNT_TIMEOUT = 120.0
BLOBFUSE_TMP_ROOT = "/tmp/trialfleet-blobfuse2"
#: NNI's blobfuse options (attribute, entry and negative caches; other users may read the mount)
BLOBFUSE_OPTIONS = ("--allow-other", "--attr-timeout=240", "--entry-timeout=240", "--negative-timeout=120")

StorageConfig = NfsConfig | AzureBlobConfig
ACCESS_KEY = "AZURE_STORAGE_ACCESS_KEY"  # blobfuse2 reads the account key from its environment


@dataclass(frozen=True)
class MountCommand:
    """A mount as the probe runs it: ``argv`` (``MOUNT_POINT`` standing for the point), secrets for its
    environment, directories to create first, and what it mounts, for messages."""

    argv: list[str]
    what: str
    env: dict[str, str] = field(default_factory=dict, repr=False)
    dirs: list[str] = field(default_factory=list)


def mount_command(config: StorageConfig, mount_point: str, account_key: str | None = None) -> MountCommand:
    """The command that mounts ``config``'s storage (pure: golden-tested)."""
    if isinstance(config, NfsConfig):
        source = f"{config.nfs_server}:{config.exported_directory}"
        return MountCommand(["mount", "-t", "nfs", source, MOUNT_POINT], f"NFS {source}")
    digest = hashlib.sha256(mount_point.encode()).hexdigest()[:12]
    tmp = posixpath.join(BLOBFUSE_TMP_ROOT, f"{config.storage_account_name}-{config.container_name}-{digest}")
    argv = [
        "blobfuse2",
        "mount",
        MOUNT_POINT,
        f"--container-name={config.container_name}",
        f"--tmp-path={tmp}",
    ]
    env = {"AZURE_STORAGE_ACCOUNT": config.storage_account_name, "AZURE_STORAGE_AUTH_TYPE": "key"}
    if account_key is not None:
        env[ACCESS_KEY] = account_key
    what = f"Azure Blob container {config.storage_account_name}/{config.container_name}"
    return MountCommand([*argv, *BLOBFUSE_OPTIONS], what, env, [tmp])


def key_vault_argv(config: AzureBlobConfig) -> list[str]:
    assert config.key_vault_name is not None and config.key_vault_key is not None
    vault, secret = config.key_vault_name, config.key_vault_key
    show = ["az", "keyvault", "secret", "show", "--vault-name", vault, "--name", secret]
    return [*show, "--query", "value", "--output", "tsv"]


class SharedStorage:
    """The experiment's shared storage: mounted here, the code put on it once, mount requests for workers."""

    def __init__(self, config: StorageConfig, experiment_id: str) -> None:
        self.config = config
        self.experiment_id = experiment_id
        # remote paths relative to the workers' mount point, which a host resolves (it may be ~/data)
        self.storage = MountedStorage(
            Path(config.local_mount_point) / EXPERIMENTS_DIR, EXPERIMENTS_DIR, experiment_id
        )
        self._account_key: str | None = None
        self._prepared = False

    @property
    def experiment_path(self) -> str:
        """The experiment's directory relative to the mount point: what a worker must see once mounted."""
        return self.storage.remote

    async def prepare_here(self) -> None:
        """Mount on this machine (``nnimount``) or check the user's mount, and make the experiment's directory."""
        if self._prepared:
            return
        await self._read_account_key()
        local = Path(self.config.local_mount_point)
        if self.config.local_mounted == "nnimount":
            answer = await run_local_probe("mount", self.request(str(local), expect=None))
            self.check_answer(answer, "this machine")
        elif not local.is_dir():
            raise PlatformError(
                f"sharedStorage: localMountPoint {local} is not a directory (localMounted: usermount says "
                "the storage is mounted there already)"
            )
        try:
            await asyncio.to_thread((self.storage.local / "code").mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise PlatformError(f"sharedStorage: cannot write to {local}: {exc}") from exc
        self._prepared = True

    async def code_dir(self, code_dir: Path) -> str:
        """``code_dir`` on the storage, relative to the mount point (copied there the first time)."""
        return await self.storage.code_dir(code_dir)

    def request(self, mount_point: str, *, expect: str | None) -> dict[str, Any]:
        """The probe's ``mount`` request for a machine whose mount point is ``mount_point``."""
        command = mount_command(self.config, mount_point, self._account_key)
        return {
            "mount_point": mount_point,
            "argv": command.argv,
            "env": command.env,
            "hide": [ACCESS_KEY] if ACCESS_KEY in command.env else [],
            "dirs": command.dirs,
            "expect": expect,
            "timeout": MOUNT_TIMEOUT,
        }

    def worker_request(self) -> dict[str, Any]:
        return self.request(self.config.remote_mount_point, expect=self.experiment_path)

    def check_answer(self, answer: dict[str, Any], where: str) -> str:
        """The absolute mount point from the probe's answer; PlatformError naming ``where`` when it failed."""
        what = mount_command(self.config, answer["mount_point"]).what
        point = answer["mount_point"]
        if answer["status"] == "failed":
            command = " ".join(answer.get("argv") or [])
            raise PlatformError(
                f"{where}: mounting {what} at {point} failed: {command} exited with {answer['exit']}: "
                f"{answer['output'] or '(no output)'}"
            )
        if not answer.get("visible", True):
            raise PlatformError(
                f"{where}: {what} is mounted at {point}, but the experiment's directory "
                f"{posixpath.join(point, self.experiment_path)} is not there: localMountPoint "
                f"({self.config.local_mount_point}) must show the same storage"
            )
        return str(point)

    async def _read_account_key(self) -> None:
        config = self.config
        if not isinstance(config, AzureBlobConfig) or self._account_key is not None:
            return
        if config.storage_account_key is not None:
            self._account_key = config.storage_account_key.get_secret_value()
            return
        argv = key_vault_argv(config)
        code, out, err = await _run(argv)
        key = out.strip()
        if code != 0 or not key:
            why = err.strip() or out.strip() or "no key printed"
            raise PlatformError(
                f"sharedStorage: reading the account key from key vault {config.key_vault_name} "
                f"(secret {config.key_vault_key}) failed: {' '.join(argv)} exited with {code}: {why}"
            )
        self._account_key = key


def shared_storage_for(config: Any, experiment_id: str) -> SharedStorage | None:
    """The experiment's shared storage, if its config has one."""
    storage = getattr(config, "shared_storage", None)
    return SharedStorage(storage, experiment_id) if storage is not None else None


async def run_local_probe(command: str, request: dict[str, Any]) -> dict[str, Any]:
    code, out, err = await _run(
        [sys.executable, "-I", "-S", str(PROBE_SCRIPT), command], json.dumps(request).encode()
    )
    if code != 0:
        raise PlatformError(f"this machine: probe {command} failed (exit {code}): {err.strip()[-2000:]}")
    answer: dict[str, Any] = json.loads(out)
    return answer


async def _run(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return 127, "", f"{argv[0]}: {exc.strerror or exc}"
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), MOUNT_TIMEOUT + 10)
    except TimeoutError:
        process.kill()
        await process.wait()
        return -1, "", f"no answer within {MOUNT_TIMEOUT + 10:g} s"
    return process.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
