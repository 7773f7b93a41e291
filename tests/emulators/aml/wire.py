"""Requests, responses, routing and the request log: the HTTP plumbing every service of the emulator shares."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # percent-decoded, without the query
    raw_path: str  # as sent, with the query
    query: dict[str, str]  # last value wins, keys as sent (ARM's ``api-version``, storage's ``comp``)
    headers: Message
    body: bytes
    host: str  # the Host header without the port, lower case

    @classmethod
    def parse(cls, method: str, target: str, headers: Message, body: bytes) -> Request:
        parts = urlsplit(target)
        host = (headers.get("Host") or "").lower()
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host  # keep bare IPv6 literals whole
        return cls(
            method=method,
            path=unquote(parts.path),
            raw_path=target,
            query=dict(parse_qsl(parts.query, keep_blank_values=True)),
            headers=headers,
            body=body,
            host=host,
        )

    def header(self, name: str, default: str = "") -> str:
        value = self.headers.get(name)
        return default if value is None else str(value)

    def json(self) -> Any:
        """The body as JSON; a body that is not JSON is the client's error (400), as on ARM."""
        try:
            return json.loads(self.body or b"null")
        except ValueError as error:
            raise HttpError(
                arm_error(400, "UserError", f"The request body is not valid JSON: {error}")
            ) from error


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Response:
        body = json.dumps(payload).encode()
        return cls(status, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})


class HttpError(Exception):
    """Raised by a handler to answer with ``response`` (an error body in the service's own format)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


def arm_error(
    status: int,
    code: str,
    message: str,
    *,
    target: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """ARM's error body: ``{"error": {"code", "message", "target"?, "details"?}}`` (cluster-platforms.md §6.4)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if target is not None:
        error["target"] = target
    if details is not None:
        error["details"] = details
    return Response.json(status, {"error": error}, headers)


Handler = Callable[[Request, "re.Match[str]"], Response]


class Router:
    """Routes by method and a regular expression matched against the whole decoded path."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(pattern, re.IGNORECASE), handler))

    def find(self, method: str, path: str) -> tuple[Handler, re.Match[str]] | bool | None:
        """The handler and its match; False when the path exists under another method (405); None if unknown."""
        path_known = False
        for route_method, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if route_method == method:
                return handler, match
            path_known = True
        return False if path_known else None


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the emulator saw it, and the status it answered."""

    seq: int
    time: float
    method: str
    host: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    status: int

    @property
    def api_version(self) -> str | None:
        return self.query.get("api-version")

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def to_dict(self) -> dict[str, Any]:
        text = self.body.decode("utf-8", "replace")
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "host": self.host,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": text,
            "status": self.status,
            "apiVersion": self.api_version,
        }


class RequestLog:
    """Every request in arrival order. Secrets in headers are kept: tests assert on them, and the tokens are fake."""

    def __init__(self) -> None:
        self._entries: list[LoggedRequest] = []
        self._lock = threading.Lock()

    def record(self, request: Request, status: int, when: float) -> None:
        with self._lock:
            self._entries.append(
                LoggedRequest(
                    seq=len(self._entries),
                    time=when,
                    method=request.method,
                    host=request.host,
                    path=request.path,
                    query=dict(request.query),
                    headers={key: str(value) for key, value in request.headers.items()},
                    body=request.body,
                    status=status,
                )
            )

    def entries(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
