"""A storage the manager and the workers both mount: code, support bundle and trial directories on it.

Cluster platforms run trials in containers or on nodes that see a shared storage — an NFS export, an Azure
file share, a Slurm shared directory — which the manager's machine mounts too, perhaps at another path.
Everything of one experiment lives below ``<root>/<experiment id>/`` there::

    .trialfleet/<version>/    the support bundle (keeper, probe, nni shim), named after its content
    code/<digest>/            each code directory, copied once (``.nniignore`` and NNI's limits honoured)
    trials/<attempt>/         the trial directories (docs/trial-directory.md)

:class:`MountedStorage` knows the experiment's directory on this machine (``local``) and as workers see it
(``remote``); paths handed to a job are always the remote ones. A code directory already on the storage is
used in place. Trial directories are read and written through :class:`~.trial_files.LocalTrialFiles`.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import posixpath
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from trialfleet.errors import PlatformError
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.support import SupportLayout, extract_archive, support_archive
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles


def on_storage(code_dir: Path, mount_local: Path) -> bool:
    """Whether a code directory is on the storage mounted here at ``mount_local``: then it is used in place,
    not copied (nor checked against NNI's limits)."""
    return Path(code_dir).resolve().is_relative_to(Path(mount_local).resolve())


def code_copy_name(source: Path) -> str:
    """The directory under ``<root>/code`` holding the copy of the code directory ``source``."""
    return hashlib.sha256(str(source).encode()).hexdigest()[:16]


class MountedStorage:
    """One experiment's directory on a storage mounted here at ``local`` and seen by workers at ``remote``.

    ``mount_local`` / ``mount_remote``: the storage's mount point on this machine and on the workers (equal
    when both see the same path, as on a Slurm cluster); ``local`` and ``remote`` are the experiment's
    directory below them.
    """

    description = "this machine"

    def __init__(self, mount_local: Path, mount_remote: str, experiment_id: str) -> None:
        self.mount_local = Path(mount_local)
        self.mount_remote = mount_remote
        self.local = self.mount_local / experiment_id
        self.remote = posixpath.join(mount_remote, experiment_id)
        self.layout = SupportLayout(self.remote)
        self.trials: TrialFiles = LocalTrialFiles(self.to_local)
        self._code_copies: dict[Path, str] = {}

    def to_local(self, remote_path: str) -> Path:
        """This machine's path of a path workers see below the storage's mount point."""
        relative = PurePosixPath(remote_path).relative_to(self.mount_remote)
        return self.mount_local / relative

    def to_remote(self, local_path: Path) -> str:
        relative = Path(local_path).relative_to(self.mount_local)
        return posixpath.join(self.mount_remote, relative.as_posix())

    def trial_dir(self, attempt: str) -> str:
        """A trial directory as workers see it."""
        return posixpath.join(self.remote, "trials", attempt)

    async def prepare(self) -> None:
        """Install the support bundle (once per version) and create the trials directory."""
        await asyncio.to_thread(self._install_support)

    def _install_support(self) -> None:
        target = self.to_local(self.layout.directory)
        if target.exists():
            return
        staging = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        try:
            (self.local / "trials").mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
                extract_archive(tar, staging)
            os.replace(staging, target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.exists():  # another manager may have won the rename
                raise PlatformError(f"cannot prepare {target} on the shared storage: {exc}") from exc

    async def code_dir(self, code_dir: Path) -> str:
        """The code directory as workers see it: in place when it is on the storage, else a copy there.

        The copy is made once per experiment, the first time a trial needs it, honouring ``.nniignore``.
        """
        return await asyncio.to_thread(self._code_dir, Path(code_dir))

    def _code_dir(self, code_dir: Path) -> str:
        source = code_dir.resolve()
        if on_storage(source, self.mount_local):
            return self.to_remote(self.mount_local / source.relative_to(self.mount_local.resolve()))
        if code_dir not in self._code_copies:
            target = self.local / "code" / code_copy_name(source)
            if not target.exists():
                try:
                    _copy_code(source, target)
                except OSError as exc:
                    raise PlatformError(f"cannot copy {source} to {target}: {exc}") from exc
            self._code_copies[code_dir] = self.to_remote(target)
        return self._code_copies[code_dir]

    async def read(self, remote_path: str) -> bytes | None:
        """A file workers wrote, by its remote path; None when it does not exist."""
        try:
            return await asyncio.to_thread(self.to_local(remote_path).read_bytes)
        except FileNotFoundError:
            return None

    async def close(self) -> None:
        return None


def _copy_code(source: Path, target: Path) -> None:
    """Copy the shippable files of a code directory (``.nniignore`` honoured, NNI's size limits checked)."""
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for relative in check_code_dir(source):
        src, dst = source / relative, staging / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    staging.mkdir(parents=True, exist_ok=True)  # an empty code directory is still a directory
    os.replace(staging, target)
