"""How the Slurm service reaches the shared directory: the :class:`SharedDirectory` seam and its local side.

Under ``<sharedDirectory>/<experiment id>/`` live the support bundle (``.trialfleet/<version>/``: the keeper, the
probe and the ``nni`` shim), the code directories copied there and the trial directories. The service reaches
them either on this machine (:class:`LocalSharedDirectory`: the manager runs on a cluster host) or on the login
node over SSH (:class:`~.login.LoginNodeDirectory`). Trial directories are read and written through the
platform-wide :class:`~..trial_files.TrialFiles` seam. Paths are the cluster's, as POSIX strings.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path
from typing import Protocol

from trialfleet.errors import PlatformError
from trialfleet.training_services.code_packing import check_code_dir
from trialfleet.training_services.slurm.script import JOB_ID_FILE
from trialfleet.training_services.support import SupportLayout, extract_archive, support_archive
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles


class SharedDirectory(Protocol):
    """The experiment's part of the shared directory, wherever the manager reaches it."""

    description: str
    layout: SupportLayout
    trials: TrialFiles

    async def prepare(self) -> None:
        """Install the support bundle (once per version) and create the trials directory."""

    async def code_dir(self, local: Path) -> str:
        """The cluster path of a code directory of this machine (copied there once)."""

    async def read_job_id(self, trial_dir: str) -> str | None:
        """The job id a started job wrote into the trial directory, if any."""

    async def close(self) -> None: ...


def code_copy_name(source: Path) -> str:
    """The directory under ``<root>/code`` holding the copy of the code directory ``source``."""
    return hashlib.sha256(str(source).encode()).hexdigest()[:16]


class LocalSharedDirectory:
    """The shared directory mounted on this machine; a code directory already under it is used in place."""

    description = "this machine"

    def __init__(self, shared: Path, root: Path) -> None:
        self.shared = shared
        self.root = root
        self.layout = SupportLayout(str(root))
        self.trials: TrialFiles = LocalTrialFiles()
        self._code_copies: dict[Path, str] = {}

    async def prepare(self) -> None:
        await asyncio.to_thread(self._install_support)

    def _install_support(self) -> None:
        target = Path(self.layout.directory)
        if target.exists():
            return
        staging = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        try:
            (self.root / "trials").mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            with tarfile.open(fileobj=io.BytesIO(support_archive())) as tar:
                extract_archive(tar, staging)
            os.replace(staging, target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.exists():  # another manager may have won the rename
                raise PlatformError(f"slurm: cannot prepare {target} on the shared directory: {exc}") from exc

    async def code_dir(self, local: Path) -> str:
        return await asyncio.to_thread(self._code_dir, local)

    def _code_dir(self, code_dir: Path) -> str:
        """The code directory itself when the nodes see it (it is under sharedDirectory), else a copy there.

        The copy is made once per experiment, the first time a trial needs it, honouring ``.nniignore``.
        """
        source = code_dir.resolve()
        if source.is_relative_to(self.shared.resolve()):
            return str(code_dir)
        if code_dir not in self._code_copies:
            target = self.root / "code" / code_copy_name(source)
            if not target.exists():
                try:
                    _copy_code(source, target)
                except OSError as exc:
                    raise PlatformError(f"slurm: cannot copy {source} to {target}: {exc}") from exc
            self._code_copies[code_dir] = str(target)
        return self._code_copies[code_dir]

    async def read_job_id(self, trial_dir: str) -> str | None:
        try:
            return (Path(trial_dir) / JOB_ID_FILE).read_text(encoding="utf-8")
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
