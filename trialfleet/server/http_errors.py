"""Errors as NNI's clients expect them — ``{"error": message}`` — with a 4xx for anything the caller got wrong.

Bad input never becomes a 500: malformed JSON is 400, a body of the wrong shape or value is 422, a body over
the size limit is 413, a body that is not sent as JSON is 415, an unknown trial is 404, a change refused in the
experiment's state is 403/409.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trialfleet.errors import (
    ConfigError,
    ExperimentNotFoundError,
    ExperimentStateError,
    TensorboardError,
    TrialFileRefusedError,
    TrialfleetError,
)

log = logging.getLogger("trialfleet.server")

MAX_BODY_BYTES = 1024 * 1024
#: ``POST /experiment/import-data`` takes a whole export: NNI's of 300,000 trials is 13 MB
MAX_IMPORT_BODY_BYTES = 64 * 1024 * 1024
#: routes (by the end of their path) allowed a larger body than :data:`MAX_BODY_BYTES`
LARGE_BODY_ROUTES = {"/experiment/import-data": MAX_IMPORT_BODY_BYTES}

_STATUS_OF: Sequence[tuple[type[TrialfleetError], int]] = (
    (ConfigError, 422),
    (ExperimentNotFoundError, 404),
    (ExperimentStateError, 409),
    (TrialFileRefusedError, 403),
    (TensorboardError, 400),  # NNI's status for a TensorBoard that cannot start
)


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def describe_validation(errors: Sequence[Any]) -> str:
    """Pydantic's error list → one line per problem: ``body.params.trialConcurrency: Input should be …``."""
    lines = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()))
        lines.append(f"{where}: {error.get('msg', 'invalid value')}" if where else str(error.get("msg")))
    return "; ".join(lines)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, f"the request body is not valid JSON: {describe_validation(errors)}")
    return error_response(422, describe_validation(errors))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        documented = documented_methods(request)
        if documented:
            headers["Allow"] = ", ".join(sorted(documented))
    return error_response(exc.status_code, str(exc.detail), headers)


def documented_methods(request: Request) -> set[str]:
    """Every method the schema documents at this path: Starlette's own 405 names only those of the first
    route that matched the path, not of the others at the same path."""
    methods: set[str] = set()
    for template, item in request.app.openapi().get("paths", {}).items():
        if _path_pattern(template).fullmatch(request.url.path):
            methods |= {method.upper() for method in item}
    return methods | {"HEAD"} if "GET" in methods else methods


@functools.lru_cache(maxsize=256)
def _path_pattern(template: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[^/]*?\\\}", "[^/]+", re.escape(template)))


def require_json(request: Request) -> None:
    """415 for a body sent as anything but JSON (a form or text/plain, as an HTML form on another site sends)."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise HTTPException(
            415,
            f"the request body must be JSON sent with Content-Type: application/json, not {media_type or 'none'!r}",
        )


async def _trialfleet_error(_request: Request, exc: Exception) -> JSONResponse:
    status = next((code for cls, code in _STATUS_OF if isinstance(exc, cls)), 500)
    if status == 500:
        log.error("request failed: %s", exc)
    return error_response(status, str(exc))


async def _file_not_found(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(404, str(exc))


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error while serving a request")
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(TrialfleetError, _trialfleet_error)
    app.add_exception_handler(FileNotFoundError, _file_not_found)
    app.add_exception_handler(Exception, _unexpected)


def not_found(message: str) -> HTTPException:
    return HTTPException(404, message)


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` (or a route's own limit in ``large``, keyed by the end of
    its path) with 413 before the route sees them.

    Checks ``Content-Length`` first, then counts the bytes actually received (chunked uploads); the body is
    buffered — it is small by construction — and replayed to the application.
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES, large: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.large = dict(large or {})

    def _limit(self, scope: Scope) -> int:
        path = str(scope.get("path", "")).rstrip("/")
        return next((size for end, size in self.large.items() if path.endswith(end)), self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await self._refuse(send, limit)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, send: Send, limit: int) -> None:
        body = json.dumps({"error": f"request body larger than {limit} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
