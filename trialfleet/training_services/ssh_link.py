"""A worker host over SSH that comes back after its link broke: remote machines and Slurm login nodes.

:class:`SshLink` holds one :class:`~.ssh.SshHost` (keepalive, a timeout on every call) and runs commands in the
host's login shell with ``pythonPath`` first on ``PATH``. When the link breaks, calls fail at once with
:class:`~.ssh.SshLinkError` and the link is opened again in the background — first 0.5 s later, then at delays
doubling up to 10 s — when the next call finds it due, so neither the manager's loop nor a REST request waits on
a host that does not answer. Nothing is lost meanwhile: trials run on and are read again from their cursors.

:class:`Probe` is ``probe.py`` on such a host: one JSON request, one JSON answer, one round trip.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import posixpath
import shlex
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trialfleet.errors import PlatformError
from trialfleet.training_services.ssh import COMMAND_TIMEOUT, CommandResult, SshHost, SshLinkError, SshTarget
from trialfleet.training_services.support import UNPACK_SCRIPT, run_as_module

if TYPE_CHECKING:
    from trialfleet.training_services.remote.config import RemoteMachineConfig

log = logging.getLogger(__name__)

T = TypeVar("T")
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 10.0
PROBE_ASKS = 3  # a probe command whose session ended untold is asked this many times in all
UPLOAD_TIMEOUT = 600.0

Reconnect = Callable[["SshLink"], Awaitable[None]]


class SshLink:
    """One host's SSH link: commands, down/up state, reconnection with back-off (see the module docstring).

    ``reconnect`` re-establishes the link (default: connect again); a platform that must prepare the host anew
    passes its own. ``on_up`` runs after each successful reconnection. A host marked ``permanent`` (refused key,
    wrong python) is not retried.
    """

    def __init__(
        self,
        config: RemoteMachineConfig,
        *,
        role: str,
        reconnect: Reconnect | None = None,
        on_up: Callable[[], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ssh = SshHost(SshTarget.from_machine(config))
        self.name = self.ssh.target.name
        self.role = role  # for logs: "remote: host", "slurm: login node"
        self.python_path = config.python_path
        self.clock = clock
        self.down_since: float | None = None
        self.problem: str | None = None
        self.permanent = False
        self.next_attempt = 0.0  # clock time before which no reconnect is tried
        self.reconnecting: asyncio.Task[None] | None = None
        self._reconnect = reconnect
        self.on_up = on_up
        self._delay = RECONNECT_FIRST_DELAY

    @property
    def up(self) -> bool:
        return self.ssh.connected and self.down_since is None

    async def connect(self) -> None:
        """The first connection, at start: its failure is the caller's."""
        await self.ssh.connect()

    def shell(self, argv: Sequence[str]) -> str:
        """A command line for the host's shell: ``pythonPath`` first on PATH, every argument quoted."""
        return self.shell_line(shlex.join(argv))

    def shell_line(self, line: str) -> str:
        if self.python_path:
            return f'PATH={shlex.quote(self.python_path)}:"$PATH"; export PATH; {line}'
        return line

    async def run(
        self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> CommandResult:
        """Run ``argv``; its exit status is data, a broken or down link is SshLinkError."""
        return await self.call(lambda ssh: ssh.run(self.shell(argv), stdin=stdin, timeout=timeout))

    async def checked(
        self, argv: Sequence[str], what: str, *, stdin: bytes | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> bytes:
        """Run ``argv``; PlatformError naming ``what`` unless it exits 0."""
        result = await self.run(argv, stdin=stdin, timeout=timeout)
        if result.exit_status != 0:
            raise PlatformError(f"{self.name}: {what} failed ({result.explain()})")
        return result.stdout

    async def call(self, operation: Callable[[SshHost], Awaitable[T]]) -> T:
        """Any operation on the connection; SshLinkError at once while there is none."""
        if not self.ssh.connected:  # (a reconnection in progress has one: it prepares the host through it)
            self.ensure()
            raise SshLinkError(f"{self.name}: unreachable ({self.problem}); reconnecting")
        try:
            return await operation(self.ssh)
        except SshLinkError as exc:
            self.mark_down(str(exc))
            raise

    def ensure(self) -> bool:
        """Whether the link is up; if not, note it and start a reconnection when one is due."""
        if self.up:
            return True
        if self.down_since is None:
            self.mark_down("not connected")  # never opened, or closed by the keepalive
        busy = self.reconnecting is not None and not self.reconnecting.done()
        if not busy and not self.permanent and self.clock() >= self.next_attempt:
            self.reconnecting = asyncio.create_task(self._try_reconnect())
        return False

    async def unpack(self, archive: Path, target: str, *, timeout: float = UPLOAD_TIMEOUT) -> None:
        """Upload ``archive`` and unpack it on the host as ``target``, which appears whole or not at all."""
        uploaded = f"{target}.{os.getpid()}.tar.gz"
        await self.checked(["mkdir", "-p", "--", posixpath.dirname(target)], "creating directories")
        await self.call(lambda ssh: ssh.put(archive, uploaded, timeout=timeout))
        argv = ["python3", "-c", UNPACK_SCRIPT, uploaded, target]
        await self.checked(argv, f"unpacking {archive.name} into {target}", timeout=timeout)

    def mark_down(self, why: str) -> None:
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            log.warning("%s %s unreachable (%s); its trials run on, reconnecting", self.role, self.name, why)
        self.problem = why
        self.next_attempt = now + self._delay
        self._delay = min(self._delay * 2, RECONNECT_MAX_DELAY)

    def down_for(self) -> float:
        return 0.0 if self.down_since is None else self.clock() - self.down_since

    async def _try_reconnect(self) -> None:
        try:
            if self._reconnect is not None:
                await self._reconnect(self)
            else:
                await self.ssh.connect()
        except (
            PlatformError,
            TimeoutError,
        ) as exc:  # a refused key is retried too: the host may be restarting
            self.mark_down(str(exc) or "no answer")
            return
        if self.down_since is not None:
            log.info("%s %s reachable again after %.0f s", self.role, self.name, self.down_for())
        self.down_since, self.problem = None, None
        self._delay, self.next_attempt = RECONNECT_FIRST_DELAY, 0.0
        if self.on_up is not None:
            await self.on_up()

    async def close(self) -> None:
        if self.reconnecting is not None:
            self.reconnecting.cancel()
        await self.ssh.close()


class Probe:
    """``probe.py`` on a host (``trialfleet/trial_keeper/probe.py``): a JSON request on stdin, a JSON answer.

    SshLinkError when the link fails (nothing happened, or the caller cannot know: it asks again), PlatformError
    when the probe itself does.
    """

    def __init__(self, link: SshLink, script: str) -> None:
        self.link = link
        self.script = script

    async def call(self, command: str, request: dict[str, Any], *, timeout: float = COMMAND_TIMEOUT) -> Any:
        argv = run_as_module(self.script, command)
        for _ in range(PROBE_ASKS):
            result = await self.link.run(argv, stdin=json.dumps(request).encode(), timeout=timeout)
            if result.told:
                break
            # sshd closed the session untold (seen when sessions ran short): every probe command may be
            # asked again, and a launch asked again answers with the keeper the first one started
            log.info("%s: probe %s: %s; asking again", self.link.name, command, result.explain())
        if result.exit_status != 0:
            raise PlatformError(f"{self.link.name}: probe {command} failed ({result.explain()})")
        try:
            return json.loads(result.stdout)
        except ValueError as exc:
            raise PlatformError(
                f"{self.link.name}: probe {command} answered {result.stdout[:200]!r}"
            ) from exc
