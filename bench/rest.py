"""REST calls of the benchmark: plain HTTP/1.1 on loopback, with the standard library only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from bench.stats import percentile

NNI_API = "/api/v1/nni"


def get_json(base: str, route: str, timeout: float = 60) -> Any:
    with urllib.request.urlopen(base + route, timeout=timeout) as response:
        return json.loads(response.read())


def try_get_json(base: str, route: str, timeout: float = 10) -> Any:
    try:
        return get_json(base, route, timeout)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def wait_for(base: str, route: str, predicate: Any, timeout: float, poll: float = 0.05) -> Any:
    """Poll ``route`` until ``predicate(body)`` holds; returns the body (TimeoutError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = try_get_json(base, route)
        if body is not None and predicate(body):
            return body
        time.sleep(poll)
    raise TimeoutError(f"{base}{route}: condition not met within {timeout:.0f} s")


@dataclass
class Latency:
    route: str
    median_ms: float
    p99_ms: float
    max_ms: float
    bytes: int


def measure_latency(base: str, route: str, requests: int, label: str | None = None) -> Latency:
    """``requests`` sequential GETs, each on a fresh connection (as NNI's baseline measured them)."""
    times, size = [], 0
    for _ in range(requests):
        start = time.perf_counter()
        with urllib.request.urlopen(base + route, timeout=60) as response:
            size = len(response.read())
        times.append((time.perf_counter() - start) * 1000)
    return Latency(label or route, percentile(times, 50), percentile(times, 99), max(times), size)


@dataclass
class PollingClients:
    """``clients`` clients, each polling ``routes`` in turn on its own keep-alive connection every ``interval``.

    The clients are coroutines on one event loop in a thread of their own, speaking HTTP/1.1 on raw streams:
    50 client threads cost the measurement itself tens of milliseconds per request on a busy 2-core machine
    (each waits for the GIL, 5 ms per hand-over, and for its share of the bench process's CPU), which was
    counted as the server's latency. Bounded: every client stops after ``max_requests`` requests or when the
    context exits, whichever comes first, and only ever talks to ``host`` (loopback).
    """

    host: str
    port: int
    routes: list[str]
    clients: int = 50
    interval: float = 0.5
    max_requests: int = 2000
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        assert self.host.startswith("127.") or self.host == "localhost", "load goes to loopback only"
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._started = 0.0
        self._ended = 0.0

    def __enter__(self) -> PollingClients:
        self._started = time.monotonic()
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._ended = time.monotonic()

    @property
    def requests_per_second(self) -> float:
        span = (self._ended or time.monotonic()) - self._started
        return len(self.latencies_ms) / span if span > 0 else float("nan")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._clients())
        finally:
            self._loop.close()

    async def _clients(self) -> None:
        self._stop = asyncio.Event()
        self._ready.set()
        await asyncio.gather(*(self._client() for _ in range(self.clients)))

    async def _client(self) -> None:
        assert self._stop is not None
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        done = 0
        while not self._stop.is_set() and done < self.max_requests:
            for route in self.routes:
                done += 1
                start = time.perf_counter()
                try:
                    connection = connection or await asyncio.open_connection(self.host, self.port)
                    status = await _get(*connection, self.host, route)
                except (OSError, ValueError, asyncio.IncompleteReadError):
                    status = 0
                if status == 200:
                    self.latencies_ms.append((time.perf_counter() - start) * 1000)
                else:
                    self.errors += 1
                    if connection:
                        connection[1].close()
                    connection = None  # reconnects on the next request
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
        if connection:
            connection[1].close()


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, route: str) -> int:
    """One GET on a kept-alive HTTP/1.1 connection; its status once the whole body is read."""
    writer.write(f"GET {route} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    if headers.get("connection") == "close":
        raise ValueError("the server closed the connection")
    return status
