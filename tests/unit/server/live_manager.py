"""A started manager running real trials on its own event loop in a thread, and its app callable from any loop.

Callers that drive an ASGI app from a loop of their own (schemathesis, Starlette's TestClient) would otherwise
run the routes away from the manager's loop: ``on_loop`` forwards each request to the manager's loop and the
request's ``receive``/``send`` back to the caller's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trialfleet.manager.experiment_manager import ExperimentManager

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def on_loop(app: ASGIApp, loop: asyncio.AbstractEventLoop) -> ASGIApp:
    async def forwarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            raise RuntimeError("lifespan is not used")  # before any receive: servers take it as "unsupported"
        caller = asyncio.get_running_loop()

        def back(channel: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def call(*args: Any) -> Any:
                return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(channel(*args), caller))

            return call

        done = asyncio.run_coroutine_threadsafe(app(scope, back(receive), back(send)), loop)
        await asyncio.wrap_future(done)

    return forwarded


@contextmanager
def manager_in_thread(experiment_dir: Path) -> Iterator[tuple[ExperimentManager, asyncio.AbstractEventLoop]]:
    """Start the experiment's manager on a new loop in a thread; stop it (trials and all) on exit."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="manager-loop", daemon=True)
    thread.start()

    async def build() -> ExperimentManager:
        manager = ExperimentManager(experiment_dir)
        await manager.start()
        return manager

    manager = asyncio.run_coroutine_threadsafe(build(), loop).result(60)
    running: Future[Any] = asyncio.run_coroutine_threadsafe(manager.run(), loop)
    try:
        yield manager, loop
    finally:
        loop.call_soon_threadsafe(manager.request_stop)
        running.result(60)
        manager.store.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
