"""The HTTPS listener: a threading HTTP/1.1 server whose connections are wrapped in TLS in their own thread (a stalled
handshake never blocks the accept loop), handing each request to an application callable."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .wire import Request, Response

Application = Callable[[Request], Response]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pools expect
    server: TlsServer

    def log_message(self, format: str, *args: Any) -> None:  # the request log replaces stderr chatter
        return

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request.parse(self.command, self.path, self.headers, body)
        response = self.server.application(request)
        self.send_response(response.status)
        for key, value in response.headers.items():
            if key.lower() != "content-length":
                self.send_header(key, value)
        # a HEAD answer announces the blob's length without a body
        length_header = response.headers.get("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length_header or str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _serve


class TlsServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext, application: Application) -> None:
        self.context = context
        self.application = application
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            connection = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that does not trust the CA hangs up during the handshake
        try:
            self.RequestHandlerClass(connection, client_address, self)
        except (ConnectionError, ssl.SSLError, TimeoutError):
            pass
        finally:
            with contextlib.suppress(OSError):
                connection.close()


def serve(
    host: str, port: int, context: ssl.SSLContext, application: Application
) -> tuple[TlsServer, threading.Thread]:
    server = TlsServer((host, port), context, application)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="aml-emulator-https", daemon=True
    )
    thread.start()
    return server, thread
