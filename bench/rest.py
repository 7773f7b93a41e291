"""REST calls of the benchmark: plain HTTP/1.1 on loopback, with the standard library only."""

from __future__ import annotations

import http.client
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
    """``clients`` threads, each polling ``routes`` in turn on its own keep-alive connection.

    Bounded: every client stops after ``max_requests`` requests or when the context exits, whichever comes
    first, and only ever talks to ``host`` (loopback).
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
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)]
        self._started = 0.0
        self._ended = 0.0

    def __enter__(self) -> PollingClients:
        self._started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self._ended = time.monotonic()

    @property
    def requests_per_second(self) -> float:
        span = (self._ended or time.monotonic()) - self._started
        return len(self.latencies_ms) / span if span > 0 else float("nan")

    def _client(self) -> None:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        done = 0
        while not self._stop.is_set() and done < self.max_requests:
            for route in self.routes:
                done += 1
                self._one(connection, route)
            self._stop.wait(self.interval)
        connection.close()

    def _one(self, connection: http.client.HTTPConnection, route: str) -> None:
        start = time.perf_counter()
        try:
            connection.request("GET", route)
            response = connection.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            connection.close()  # reconnects on the next request
            ok = False
        with self._lock:
            if ok:
                self.latencies_ms.append((time.perf_counter() - start) * 1000)
            else:
                self.errors += 1
