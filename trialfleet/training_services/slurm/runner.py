"""How the Slurm service runs ``sbatch``, ``squeue``, ``sacct`` and ``scancel``: a small seam.

:class:`CommandRunner` is the whole interface (``run(argv) -> (code, out, err)``). :class:`LocalCommandRunner`
runs the commands on this machine, which must then be a cluster host that sees the shared directory;
:class:`~.login.SshCommandRunner` runs them on the configured ``loginNode`` over SSH.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from trialfleet.errors import PlatformError

#: a Slurm command that has not answered after this long is treated as failed (slurmctld overloaded or down)
COMMAND_TIMEOUT = 60.0


class CommandResult(NamedTuple):
    code: int
    out: str
    err: str


class CommandRunner(Protocol):
    """Runs one command (an argv list, never a shell string) where the Slurm client commands live."""

    description: str  # for messages: "this machine", "login node alice@login1"

    async def run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        """Run ``argv``; raise :class:`PlatformError` only when it cannot be started or does not answer."""
        ...


class LocalCommandRunner:
    """Runs Slurm's client commands on this machine, with its environment (``SLURM_CONF`` included)."""

    description = "this machine"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(os.environ if env is None else env)

    async def run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
            )
        except OSError as exc:
            raise PlatformError(f"slurm: cannot run {argv[0]} on {self.description}: {exc}") from exc
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        except asyncio.TimeoutError as exc:  # not the builtin before Python 3.11
            process.kill()
            await process.wait()
            raise PlatformError(
                f"slurm: {argv[0]} did not answer within {timeout:g} s on {self.description}"
            ) from exc
        assert process.returncode is not None
        return CommandResult(
            process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        )
