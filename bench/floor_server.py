"""The floor of REST latency under load: an HTTP server that does nothing but answer.

``python -m bench.floor_server PORT BYTES`` answers every request on a kept-alive connection with the same
``BYTES``-long JSON body, on one asyncio loop in a session of its own, as a manager is. Polled by the same
clients while the same trials run, it shows what latency the machine itself allows then: how long a process
that wakes up for a request waits for a core beside the trials, and how long 50 requests that arrive together
take to drain when answering costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator


async def _serve(port: int, body: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(head + body)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def floor_server(port: int, body_bytes: int) -> Iterator[None]:
    """The floor server on ``port`` (loopback) while the context lasts."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.floor_server", str(port), str(body_bytes)], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the floor server did not start") from None
                time.sleep(0.02)
        yield
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    body = b"[" + b"0," * (int(sys.argv[2]) // 2 - 1) + b"0]"
    asyncio.run(_serve(int(sys.argv[1]), body))
