"""The runner: one long-lived probe per host, fed over the SSH link that is already open.

Each host runs ``probe.py serve`` once, on a channel of the existing connection; a call is one JSON line on its
stdin and one on its stdout. Polls and file reads always go through it, and it watches the trials it polled,
launched or was asked to ``watch``, reporting an ``ended`` event the moment a keeper writes its end record: the
manager polls at once instead of at its next tick, and the next trial starts within a round trip or two.

Without reuse, launches, kills and the preparation are SSH sessions of their own (``python3 probe.py
<command>``). With reuse (``reuseMode: true``) they go through the runner too: a trial after the first starts
without any new session, upload or process start-up but its own keeper's.

Nothing of the crash safety moves into the runner: trials still run under the stdlib keeper, in their own
sessions, with their records in the trial directory, so a runner that dies (killed, or its link or manager gone)
ends no trial; a call in flight fails as a broken link does (:class:`~..ssh.SshLinkError`: the caller asks
again, and submit is idempotent), and the next call starts a new runner. A restarted manager starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.ssh import COMMAND_TIMEOUT, SshLinkError
from trialfleet.training_services.ssh_link import Probe, SshLink
from trialfleet.training_services.support import run_as_module

if TYPE_CHECKING:
    import asyncssh

log = logging.getLogger(__name__)


class ProbeRunner(Probe):
    """The probe of one host as a long-lived process (``probe.py serve``); the same ``call`` as :class:`Probe`.

    ``on_ended(trial_dir)`` is called when the host reports that a trial's keeper wrote its end record.
    ``starts`` counts the runners started (one per connection, or more if one died).
    """

    def __init__(self, link: SshLink, script: str, on_ended: Callable[[str], None]) -> None:
        super().__init__(link, script)
        self.on_ended = on_ended
        self.starts = 0
        self.pid: int | None = None  # the serving probe's pid on the host
        self._process: asyncssh.SSHClientProcess[bytes] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._starting = asyncio.Lock()

    async def call(self, command: str, request: dict[str, Any], *, timeout: float = COMMAND_TIMEOUT) -> Any:
        process = await self._running()
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        line = json.dumps({"id": call_id, "command": command, "request": request}) + "\n"
        try:
            try:
                process.stdin.write(line.encode())
            except Exception as exc:  # asyncssh's own errors too: the channel is gone
                raise SshLinkError(f"{self.link.name}: the runner's channel is closed: {exc}") from exc
            return await asyncio.wait_for(future, timeout)
        except TimeoutError as exc:
            await self.stop()  # a runner that does not answer is replaced, as a link that does not is
            raise SshLinkError(
                f"{self.link.name}: the runner did not answer {command} within {timeout:g}s"
            ) from exc
        finally:
            self._pending.pop(call_id, None)

    async def _running(self) -> asyncssh.SSHClientProcess[bytes]:
        async with self._starting:
            if self._process is not None and self._reader is not None and not self._reader.done():
                return self._process
            command = self.link.shell(run_as_module(self.script, "serve"))
            process = await self.link.call(lambda ssh: ssh.start_process(command))
            self._process, self.starts = process, self.starts + 1
            ready = asyncio.get_running_loop().create_future()
            self._reader = asyncio.create_task(self._read(process, ready))
            try:
                self.pid = await asyncio.wait_for(ready, COMMAND_TIMEOUT)
            except (TimeoutError, SshLinkError) as exc:
                await self.stop()
                raise SshLinkError(f"{self.link.name}: the runner did not start: {exc}") from exc
            log.info("remote: %s: runner %s started", self.link.name, self.pid)
            return process

    async def _read(self, process: asyncssh.SSHClientProcess[bytes], ready: asyncio.Future[int]) -> None:
        why = "the runner ended"
        try:
            while True:
                line = await process.stdout.readline()
                if not line:
                    break
                self._dispatch(json.loads(line), ready)
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            why = f"the runner's output broke off: {exc}"
        except Exception as exc:  # asyncssh's errors: the link broke under the runner
            why = f"the runner's channel failed: {exc}"
        with contextlib.suppress(Exception):
            why += _stderr_tail(await asyncio.wait_for(process.stderr.read(), 1.0))
        error = SshLinkError(f"{self.link.name}: {why}")
        if not ready.done():
            ready.set_exception(error)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        log.info("remote: %s: %s", self.link.name, why)

    def _dispatch(self, message: dict[str, Any], ready: asyncio.Future[int]) -> None:
        event = message.get("event")
        if event == "ready":
            if not ready.done():
                ready.set_result(int(message["pid"]))
        elif event == "ended":
            self.on_ended(message["trial_dir"])
        else:
            future = self._pending.get(message.get("id", -1))
            if future is None or future.done():
                return
            if "error" in message:
                future.set_exception(PlatformError(f"{self.link.name}: probe failed ({message['error']})"))
            else:
                future.set_result(message["answer"])

    async def stop(self) -> None:
        """End this runner (its trials run on); the next call starts another."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(Exception):
                process.stdin.write_eof()
            process.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        error = SshLinkError(f"{self.link.name}: the runner was stopped")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)


def _stderr_tail(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.strip()
    return f" ({text[-500:]})" if text else ""
