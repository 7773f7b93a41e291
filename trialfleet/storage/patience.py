"""Writes of the manager's event loop, waited out while another process holds the database's write lock.

The manager's store does not wait for SQLite's lock (``wait_for_lock=False``): a write that finds it taken
raises StoreBusyError at once, and is tried again here after an ``asyncio.sleep`` that backs off from 10 ms
towards 1 s. The event loop goes on meanwhile: REST reads (their own read-only connections; a write lock does
not stop a WAL reader) are answered, streams go on, and ``check-status`` says the database is locked. Each
write is one transaction, so a write tried again is the same write: nothing is half-stored, nothing twice.

Code that cannot wait (a status change, a callback) writes through :meth:`PatientWrites.soon`: at once when it
can, else queued. While writes wait, later ones queue behind them: one task makes them in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from trialfleet.errors import StoreBusyError

log = logging.getLogger("trialfleet.manager")

P = ParamSpec("P")
T = TypeVar("T")

FIRST_DELAY = 0.01
MAX_DELAY = 1.0


class PatientWrites:
    """Calls a store's write again until another process's write lock is gone; says so while it waits. Writes
    are made in the order they were asked for, whether awaited or :meth:`soon`."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = path
        self.busy_since: float | None = None  # wall time the lock was first found taken, while it is
        self._queued: deque[tuple[Callable[[], Any], asyncio.Future[Any] | None]] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None  # of a write made soon(): raised to the next writer

    async def __call__(self, write: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._raise_failure()
        call = lambda: write(*args, **kwargs)  # noqa: E731
        done = self._now(call)
        if done is not _QUEUED:
            return cast(T, done)
        made: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(call, made)
        return await made

    def soon(self, write: Callable[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> None:
        """Make the write now, or, while the database is locked, as soon as it is."""
        self._raise_failure()
        call = lambda: write(*args, **kwargs)  # noqa: E731
        if self._now(call) is _QUEUED:
            self._enqueue(call, None)

    async def drain(self) -> None:
        """Wait until the queued writes are made (raising the error of one made soon() that failed)."""
        while self._drainer is not None and not self._drainer.done():
            await asyncio.shield(self._drainer)
        self._raise_failure()

    def _now(self, call: Callable[[], Any]) -> Any:
        """The write's result, or _QUEUED when it must wait (the lock is taken, or earlier writes wait)."""
        if self._queued:
            return _QUEUED
        try:
            result = call()
        except StoreBusyError as exc:
            self._busy(exc)
            return _QUEUED
        self._free()
        return result

    def _enqueue(self, call: Callable[[], Any], made: asyncio.Future[Any] | None) -> None:
        self._queued.append((call, made))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain_queue())

    async def _drain_queue(self) -> None:
        delay = FIRST_DELAY
        while self._queued:
            call, made = self._queued[0]
            try:
                result = call()
            except StoreBusyError as exc:
                self._busy(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_DELAY)
                continue
            except Exception as exc:  # told to whoever asked for it
                self._queued.popleft()
                if made is None:
                    self._failure = exc
                elif not made.done():
                    made.set_exception(exc)
                continue
            self._free()
            self._queued.popleft()
            if made is not None and not made.done():
                made.set_result(result)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def _busy(self, exc: StoreBusyError) -> None:
        if self.busy_since is None:
            self.busy_since = time.time()
            self.path = exc.path
            log.warning("%s; its writes wait for the lock (reads are still answered)", exc)

    def _free(self) -> None:
        if self.busy_since is not None:
            log.warning(
                "the experiment database %s can be written again, after %.1f s",
                self.path,
                time.time() - self.busy_since,
            )
            self.busy_since = None

    def warning(self) -> str | None:
        """What ``check-status`` shows while writes wait for the lock, else None."""
        if self.busy_since is None:
            return None
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.busy_since))
        return (
            f"the experiment database {self.path} is locked by another process since {since}: its writes wait "
            "(the trials' results are stored once it is released); reads are answered"
        )


_QUEUED = object()
