"""The manager's HTTP server: NNI's REST routes under ``[/<url prefix>]/api/v1/nni``, ``/logs/<file>`` and the
web UI (:mod:`trialfleet.webui`). The manager process serves it with uvicorn on the manager's own event loop.

OpenAPI: ``/api/v1/nni/openapi.json`` and interactive docs at ``/api/v1/nni/docs``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from trialfleet.access import AccessPolicy
from trialfleet.nni_view.reader import ExperimentReader
from trialfleet.server import routes_files, routes_read, routes_tensorboard, routes_write
from trialfleet.server.auth import AccessMiddleware
from trialfleet.server.cache import CachedReadsMiddleware, ChangeCounter, ResponseCache
from trialfleet.server.context import ServerContext
from trialfleet.server.http_errors import (
    LARGE_BODY_ROUTES,
    MAX_BODY_BYTES,
    BodyLimitMiddleware,
    install_error_handlers,
)
from trialfleet.server.lists import FORGET_AFTER, WholeLists
from trialfleet.server.models import ERROR_RESPONSES
from trialfleet.storage import ExperimentStore
from trialfleet.tensorboard import TensorboardTasks
from trialfleet.webui import mount as mount_webui

if TYPE_CHECKING:
    from trialfleet.manager.experiment_manager import ExperimentManager

API_PATH = "/api/v1/nni"


def normalise_prefix(prefix: str | None) -> str:
    """``"nni/"`` → ``"/nni"``; empty or ``"/"`` → ``""``."""
    stripped = (prefix or "").strip("/")
    return f"/{stripped}" if stripped else ""


def create_app(
    manager: ExperimentManager, *, url_prefix: str | None = None, access: AccessPolicy | None = None
) -> FastAPI:
    """The app serving ``manager``; ``access`` decides who may call it (by default anyone: in-process use)."""
    from trialfleet import __version__

    prefix = normalise_prefix(url_prefix)
    api = prefix + API_PATH
    #: what the app opened for itself (read-only database connections): closed when it shuts down
    closers: list[Callable[[], object]] = []

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        forgetting = asyncio.ensure_future(_forget_unasked(_app.state.trialfleet.lists))
        try:
            await run_in_threadpool(_warm, _app.state.trialfleet.reader)
            yield
        finally:
            forgetting.cancel()
            for close in reversed(closers):
                close()

    app = _Server(
        lifespan=lifespan,
        title="trialfleet",
        version=__version__,
        description="NNI-compatible REST API of one trialfleet experiment.",
        openapi_url=f"{api}/openapi.json",
        docs_url=f"{api}/docs",
        redoc_url=None,
    )
    reader_store = ExperimentStore.for_experiment_dir(manager.experiment_dir, readonly=True)
    counter = ChangeCounter(reader_store.path)
    cache = ResponseCache(counter)
    lists = WholeLists(reader_store.path, manager.experiment_dir)
    closers += [reader_store.close, counter.close, lists.close]
    app.state.trialfleet = ServerContext(
        manager, ExperimentReader(reader_store, manager.experiment_dir), cache, lists
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=MAX_BODY_BYTES, large=LARGE_BODY_ROUTES)
    policy = access or AccessPolicy()
    # first the access policy, then a kept body, before any of Starlette's and FastAPI's own layers
    app.front = lambda inner: AccessMiddleware(CachedReadsMiddleware(inner, cache), policy)
    app.state.tensorboard = TensorboardTasks(manager.experiment_dir / "log")
    for router in (
        routes_read.router,
        routes_write.router,
        routes_files.api_router,
        routes_tensorboard.router,
    ):
        app.include_router(router, prefix=api)
    app.include_router(routes_files.logs_router, prefix=prefix)
    mount_webui(app, manager, prefix=prefix, closers=closers)
    _document_errors(app, bearer=policy.token is not None)
    return app


class _Server(FastAPI):
    """FastAPI, with ``front`` wrapped around the whole of it: the access policy and the cached reads run before
    FastAPI's per-request telemetry checks, Starlette's error pages and FastAPI's own layers, which a kept body
    does not need (py-spy: those were about a fifth of the CPU of a GET answered from the cache). An exception in
    ``front`` itself is answered by uvicorn with a plain 500."""

    front: Callable[[ASGIApp], ASGIApp] = staticmethod(lambda inner: inner)
    _fronted: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._fronted is None:
            self._fronted = self.front(super().__call__)
        await self._fronted(scope, receive, send)


def _document_errors(app: FastAPI, *, bearer: bool) -> None:
    """Every route, the web UI's included, answers refusals with ``{"error": ...}``: the schema says so
    (FastAPI would document its own 422 shape, which this server never sends). With a token, the schema
    names the bearer scheme it is sent with."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # cached by FastAPI: the edits below are idempotent
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                operation["responses"].pop("422", None)
                operation["responses"].update(ERROR_RESPONSES)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        if bearer:
            schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["accessToken"] = {"type": "http", "scheme": "bearer"}
            schema["security"] = [{"accessToken": []}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _forget_unasked(lists: WholeLists) -> None:
    """NNI's whole lists are kept (megabytes at 10,000 trials) only while someone asks for them."""
    while True:
        await asyncio.sleep(FORGET_AFTER / 3)
        lists.forget_unasked()


def _warm(reader: ExperimentReader) -> None:
    """A first query on the read connection, in a worker thread, before the server answers: SQLite reads the
    schema on a connection's first statement and the worker pool starts its first thread. Left to the first
    requests, 50 clients asking at once as the experiment started waited ~30 ms for that first build (p99
    50-67 ms under workload 6's load; 29-38 ms with this). An error is left for the requests to report."""
    with contextlib.suppress(Exception):
        reader.job_statistics()
