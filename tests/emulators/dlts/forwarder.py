"""A job endpoint's NodePort service: a TCP port of its own that forwards to the job's ``podPort``.

DLTS exposes ``{"name", "podPort"}`` through a Kubernetes NodePort service, so a client must connect to the
reported ``nodeName``:``port``, never to ``podPort``. The job's process shares this machine's network here, so
the service is a loopback listener on a free port relaying bytes to ``127.0.0.1:podPort``.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Forwarder:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self._listener = socket.create_server((host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"dlts-nodeport-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()  # nothing listens on podPort yet: the connection is refused, as through a service
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.close()


__all__ = ["Forwarder"]
