"""Slurm from outside the cluster: every command and every file of the shared directory through a login node.

The login node is an :class:`~..ssh_link.SshLink` (keepalive, a timeout on every call, reconnection in the
background with back-off). While its link is down, operations fail at once with :class:`~..ssh.SshLinkError`;
nothing is lost: the trials are Slurm jobs that run on, and the service reads their directories again from
the cursors once the link is back.

:class:`SshCommandRunner` runs Slurm's commands in the login node's own environment (its ``PATH`` and
``SLURM_CONF``, as a non-interactive SSH session gets them; ``loginNode.pythonPath`` is put first on ``PATH``).
:class:`LoginNodeDirectory` is the shared directory as the login node sees it: the support bundle and each code
directory are uploaded once, as an archive unpacked beside its final name and then renamed into place; the
trial directories are read and written by ``probe.py`` (:class:`~..trial_files.ProbeTrialFiles`): one round
trip per poll for every live trial.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
from collections.abc import Sequence
from pathlib import Path

from trialfleet.errors import PlatformError
from trialfleet.training_services.code_packing import pack_code_dir
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.remote.config import RemoteMachineConfig
from trialfleet.training_services.slurm.runner import COMMAND_TIMEOUT, CommandResult
from trialfleet.training_services.ssh_link import Probe, SshLink
from trialfleet.training_services.support import MIN_PYTHON, SupportLayout, support_archive, support_version
from trialfleet.training_services.trial_files import ProbeTrialFiles, TrialFiles

# the login node's python may be old: it reports its version rather than failing on newer syntax
_PREPARE_SCRIPT = (
    "import json, os, sys\n"
    "if not os.path.isdir(sys.argv[2]): os.makedirs(sys.argv[2])\n"
    "print(json.dumps({'version': list(sys.version_info[:3]), 'support': os.path.isdir(sys.argv[1])}))\n"
)


def login_link(config: RemoteMachineConfig) -> SshLink:
    return SshLink(config, role="slurm: login node")


class SshCommandRunner:
    """Runs Slurm's client commands on the login node."""

    def __init__(self, link: SshLink) -> None:
        self.link = link
        self.description = f"login node {link.name}"

    async def run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        done = await self.link.run(argv, timeout=timeout)
        return CommandResult(
            done.exit_status, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
        )


class LoginNodeDirectory:
    """The shared directory through the login node (see the module docstring)."""

    def __init__(self, link: SshLink, root: str, staging: Path) -> None:
        self.link = link
        self.root = root
        self.staging = staging  # archives are packed here before the upload
        self.description = f"login node {link.name}"
        self.layout = SupportLayout(root)
        self.trials: TrialFiles = ProbeTrialFiles(Probe(link, self.layout.probe))
        self._code_dirs: dict[Path, str] = {}

    async def prepare(self) -> None:
        try:
            await self.link.connect()
        except PlatformError as exc:
            raise PlatformError(f"slurm: cannot use the login node: {exc}") from exc
        argv = ["python3", "-c", _PREPARE_SCRIPT, self.layout.directory, posixpath.join(self.root, "trials")]
        info = json.loads(await self._checked(argv, "preparing the shared directory"))
        if tuple(info["version"]) < MIN_PYTHON:
            found = ".".join(map(str, info["version"]))
            raise PlatformError(
                f"slurm: python3 on {self.description} is {found}; the probe needs 3.8 or newer"
            )
        if not info["support"]:
            archive = self.staging / f"support-{support_version()}.tar.gz"
            await asyncio.to_thread(_write_bytes, archive, support_archive())
            await self.link.unpack(archive, self.layout.directory)

    async def code_dir(self, local: Path) -> str:
        if local not in self._code_dirs:
            name = code_copy_name(local.resolve())
            target = posixpath.join(self.root, "code", name)
            if (await self.link.run(["test", "-d", target])).exit_status != 0:
                archive = await asyncio.to_thread(pack_code_dir, local, self.staging / f"code-{name}.tar.gz")
                await self.link.unpack(archive, target)
            self._code_dirs[local] = target
        return self._code_dirs[local]

    async def read(self, path: str) -> bytes | None:
        try:
            return await self.link.call(lambda ssh: ssh.read(path))
        except FileNotFoundError:
            return None

    async def close(self) -> None:
        await self.link.close()

    async def _checked(self, argv: Sequence[str], what: str, *, timeout: float = COMMAND_TIMEOUT) -> bytes:
        result = await self.link.run(argv, timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"slurm: {what} on {self.description} failed ({result.explain()})")
        return result.stdout


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
