"""A CONNECT proxy that takes the storage account's real-style host names to the emulator.

The SDK builds some storage URLs itself from the cloud's storage suffix: ``https://<account>.blob.<suffix>`` (a
datastore's account URL, used by ``jobs.stream`` to list a job's logs). No DNS answers for such a name here, so
clients set ``HTTPS_PROXY`` to this proxy (and ``NO_PROXY=127.0.0.1,localhost`` for everything else); every
``requests``-based client honours those variables. Only hosts under the emulator's suffix are tunnelled; anything
else is refused (403), so a misconfigured test can never reach the internet through it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import threading


class _ProxyHandler(socketserver.StreamRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        request_line = self.rfile.readline(65537).decode("latin-1").strip()
        while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
            pass  # the CONNECT request's headers carry nothing the emulator needs
        method, _, rest = request_line.partition(" ")
        authority = rest.split(" ", 1)[0]
        host, _, port = authority.rpartition(":")
        if method != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        if not host.lower().endswith("." + self.server.suffix) or port not in ("443", ""):
            self.server.refused.append(authority)
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        self.server.tunnelled.append(authority)
        with socket.create_connection(("127.0.0.1", self.server.target_port), timeout=30) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            _pipe(self.connection, upstream)


def _pipe(left: socket.socket, right: socket.socket) -> None:
    sockets = [left, right]
    while True:
        readable, _, broken = select.select(sockets, [], sockets, 30)
        if broken or not readable:
            return
        for source in readable:
            data = b""
            with contextlib.suppress(OSError):
                data = source.recv(65536)
            if not data:
                return
            (right if source is left else left).sendall(data)


class ConnectProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, target_port: int, suffix: str) -> None:
        self.target_port = target_port
        self.suffix = suffix.lower()
        self.tunnelled: list[str] = []
        self.refused: list[str] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> threading.Thread:
        thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.1}, name="aml-emulator-proxy", daemon=True
        )
        thread.start()
        return thread
