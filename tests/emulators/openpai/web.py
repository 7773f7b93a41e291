"""HTTP plumbing the way express 4 and its body parsers behave, on the standard library's threading server.

Bodies are parsed by content type as the rest server's app does (``urlencoded``, ``json``, ``text/*``; anything
else leaves ``{}``), with body-parser's 100 kB limit (413) and its 400 on bad JSON. Routes match case-insensitively
with an optional trailing slash, and ``:params`` are URI-decoded (400 when they cannot be).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

from .errors import PaiError, uncaught
from .jscompat import dumps


@dataclass
class Request:
    method: str
    path: str  # as sent, without the query
    query_string: str
    headers: Message
    raw: bytes
    client: str
    query: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    user: Any = None  # the Principal once the token was checked

    @property
    def url(self) -> str:
        return self.path + ("?" + self.query_string if self.query_string else "")

    def content_type(self) -> str:
        return (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(
        cls, value: Any, status: int = 200, content_type: str = "application/json; charset=utf-8"
    ) -> Response:
        return cls(status, dumps(value).encode(), content_type)

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/html; charset=utf-8") -> Response:
        return cls(status, text.encode(), content_type)

    @classmethod
    def error(cls, error: PaiError) -> Response:
        return cls.json(error.body(), error.status)

    def with_headers(self, headers: dict[str, str]) -> Response:
        self.headers.update(headers)
        return self


def parse_body(request: Request, limit: int) -> Any:
    """What ``req.body`` holds after the app's parsers."""
    kind = request.content_type()
    if kind not in ("application/x-www-form-urlencoded", "application/json") and not kind.startswith("text/"):
        return {}
    if len(request.raw) > limit:
        raise PaiError(413, None, "request entity too large")
    text = request.raw.decode("utf-8", errors="replace")
    if kind.startswith("text/"):
        return text
    if kind == "application/x-www-form-urlencoded":
        return dict(parse_qsl(text, keep_blank_values=True))
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        position = error.pos
        token = text[position] if position < len(text) else "end of JSON input"
        raise PaiError(400, None, f"Unexpected token {token} in JSON at position {position}") from error
    if not isinstance(value, dict | list):  # body-parser's strict mode
        raise PaiError(400, None, f"Unexpected token {text.strip()[:1]} in JSON at position 0")
    return value


Handler = Callable[[Request], Response]


@dataclass
class Route:
    method: str
    pattern: re.Pattern[str]
    names: list[str]
    handler: Handler


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        names = re.findall(r":(\w+)", template)
        regex = re.sub(r":\w+", "([^/]+?)", template.rstrip("/"))
        self.routes.append(Route(method, re.compile(f"^{regex}/?$", re.IGNORECASE), names, handler))

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.method not in (method, "*") and not (method == "HEAD" and route.method == "GET"):
                continue
            found = route.pattern.match(path)
            if found:
                return route, {
                    name: _decode(value) for name, value in zip(route.names, found.groups(), strict=True)
                }
        return None


def _decode(value: str) -> str:
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError as error:
        raise uncaught(f"Failed to decode param '{value}'", 400) from error


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], app: Callable[[Request], Response]) -> None:
        super().__init__(address, _RequestHandler)
        self.app = app


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the emulator keeps its own request log

    def _handle(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = Request(self.command, path, query, self.headers, raw, self.client_address[0])
        request.query = dict(parse_qsl(query, keep_blank_values=True))
        response = self.server.app(request)
        self.send_response(response.status)
        headers = {"X-Powered-By": "Express", **response.headers}
        if response.content_type:
            headers["Content-Type"] = response.content_type
        headers["Content-Length"] = str(len(response.body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle


__all__ = ["Request", "Response", "Route", "Router", "Server", "parse_body"]
