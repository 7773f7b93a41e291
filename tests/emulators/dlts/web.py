"""HTTP plumbing: a threaded stdlib server, requests and responses shaped like the Koa dashboard's, a request log.

Koa writes a string body as ``text/plain; charset=utf-8`` and an object as compact JSON
(``application/json; charset=utf-8``); errors thrown with ``ctx.throw``/``ctx.assert`` are text: the message for
4xx, the status phrase for 5xx.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str  # without the query, not yet percent-decoded
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def arg(self, name: str) -> str | list[str] | None:
        """A query parameter as Koa's ``ctx.query`` gives it: a string, or a list when repeated."""
        values = self.query.get(name)
        if values is None:
            return None
        return values[0] if len(values) == 1 else list(values)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def text(body: str, status: int = 200) -> Response:
    return Response(status, body.encode(), "text/plain; charset=utf-8")


def error(status: int, message: str | None = None) -> Response:
    """``ctx.throw(status, message)``: 5xx bodies are the status phrase whatever the message."""
    phrase = HTTPStatus(status).phrase
    return text(message if message is not None and status < 500 else phrase, status)


def _js_numbers(value: Any) -> Any:
    """``JSON.stringify`` writes integral numbers without a fraction: 2.0 becomes 2."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def json_body(value: Any, status: int = 200) -> Response:
    data = json.dumps(_js_numbers(value), ensure_ascii=False, separators=(",", ":"))
    return Response(status, data.encode(), "application/json; charset=utf-8")


def flask_text(value: Any) -> str:
    """What Flask's ``jsonify`` writes (sorted keys, compact, ASCII-escaped, a newline), as forwarded text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n"


def flask_value(value: Any) -> Any:
    """A backend answer after the dashboard parsed it: Flask sorted every object's keys."""
    return json.loads(json.dumps(value, sort_keys=True))


class RequestLog:
    """Every dashboard request with the answer it got, for tests to assert on."""

    def __init__(self) -> None:
        self._entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, request: Request, response: Response) -> None:
        body = request.body.decode("utf-8", errors="replace") if request.body else None
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        entry = {
            "time": time.time(),
            "method": request.method,
            "path": request.path,
            "query": {k: list(v) for k, v in request.query.items()},
            "headers": dict(request.headers),
            "body": body,
            "json": parsed,
            "status": response.status,
            "response": response.text(),
        }
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    dispatch: Callable[[Request], Response]

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        request = Request(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        response = type(self).dispatch(request)
        self.send_response_only(response.status)
        self.send_header("Date", self.date_time_string())
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.content_type is not None:
            self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log keeps what matters; stderr stays quiet in tests


class Server:
    """A threaded HTTP server on ``host``:``port`` (0: a free port) calling ``dispatch`` for each request."""

    def __init__(
        self, dispatch: Callable[[Request], Response], host: str = "127.0.0.1", port: int = 0
    ) -> None:
        handler = type("DltsHandler", (_Handler,), {"dispatch": staticmethod(dispatch)})
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="dlts-dashboard",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


__all__ = [
    "Request",
    "RequestLog",
    "Response",
    "Server",
    "error",
    "flask_text",
    "flask_value",
    "json_body",
    "text",
]
