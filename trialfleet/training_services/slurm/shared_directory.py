"""How the Slurm service reaches the shared directory: the :class:`SharedDirectory` seam.

Under ``<sharedDirectory>/<experiment id>/`` live the support bundle (``.trialfleet/<version>/``: the keeper, the
probe and the ``nni`` shim), the code directories copied there and the trial directories. The service reaches
them either on this machine (:class:`~..mounted_storage.MountedStorage`: the manager runs on a cluster host,
where the shared directory has the same path as on the nodes) or on the login node over SSH
(:class:`~.login.LoginNodeDirectory`). Trial directories are read and written through the platform-wide
:class:`~..trial_files.TrialFiles` seam. Paths are the cluster's, as POSIX strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from trialfleet.training_services.support import SupportLayout
from trialfleet.training_services.trial_files import TrialFiles


class SharedDirectory(Protocol):
    """The experiment's part of the shared directory, wherever the manager reaches it."""

    description: str
    layout: SupportLayout
    trials: TrialFiles

    async def prepare(self) -> None:
        """Install the support bundle (once per version) and create the trials directory."""

    async def code_dir(self, local: Path) -> str:
        """The cluster path of a code directory of this machine (copied there once)."""

    async def read(self, path: str) -> bytes | None:
        """A file jobs wrote (a cluster path); None when it does not exist."""

    async def close(self) -> None: ...
