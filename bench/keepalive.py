"""``python -m bench.keepalive``: per-request latency of keep-alive requests to a live manager, with the
listening socket bound as before (proto 0, no TCP_NODELAY) and as ``bind_socket`` binds it now.

Without TCP_NODELAY on the accepted connection, the response's last segment waits for the client's delayed ACK
(Nagle's algorithm): about 40 ms per keep-alive request on Linux. Each variant serves a real experiment (the
manager's loop and its server, in this process) and is asked ``--requests`` GETs of a NNI route on one
connection, after a warm-up; the median and p99 per request and the ratio are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.stats import percentile

ROUTE = "/api/v1/nni/check-status"
WARM_UP = 5


def bound_as_before(port: int) -> socket.socket:
    """The manager's listening socket before TCP_NODELAY: proto 0, so asyncio set nothing on accepted ones."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def bound_now(port: int) -> socket.socket:
    from trialfleet.manager.launcher import bind_socket

    return bind_socket(port, "127.0.0.1")


def _experiment(root: Path) -> Path:
    from trialfleet.config import ExperimentConfig
    from trialfleet.manager.launcher import create_experiment

    root.mkdir(parents=True)
    config = ExperimentConfig.for_platform(
        "local",
        trial_command=f"{sys.executable} -c pass",
        trial_code_directory=str(root),
        trial_concurrency=1,
        max_trial_number=1,
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
        tuner={"name": "Random"},
        experiment_working_directory=str(root / "experiments"),
    )
    return create_experiment(config)[1]


def _requests(port: int, count: int) -> list[float]:
    """Milliseconds of each of ``count`` GETs on one kept-alive connection, after a warm-up."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times = []
    try:
        for index in range(WARM_UP + count):
            start = time.perf_counter()
            connection.request("GET", ROUTE)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{ROUTE} answered {response.status}")
            if index >= WARM_UP:
                times.append((time.perf_counter() - start) * 1000)
        connection.request("DELETE", "/api/v1/nni/experiment")
        connection.getresponse().read()
    finally:
        connection.close()
    return times


async def _measure(root: Path, bind: Callable[[int], socket.socket], count: int) -> list[float]:
    from trialfleet.manager.process import serve
    from trialfleet.server import load_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sock = bind(port)
    manager = asyncio.create_task(serve(_experiment(root), "create", sock, load_app=load_app))
    times = await asyncio.to_thread(_requests, port, count)
    await asyncio.wait_for(manager, 60)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.keepalive", description=__doc__)
    parser.add_argument("--requests", type=int, default=100, help="timed requests per variant (default 100)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-keepalive-") as scratch:
        root = Path(scratch)
        os.environ["TRIALFLEET_HOME"] = str(root / "home")  # the user's manifest is not touched
        rows = []
        for label, bind in (("before (no TCP_NODELAY)", bound_as_before), ("now (bind_socket)", bound_now)):
            times = asyncio.run(_measure(root / label.split()[0], bind, args.requests))
            rows.append((label, percentile(times, 50), percentile(times, 99)))
    print(f"keep-alive GET {ROUTE}: {args.requests} requests on one connection, per request")
    for label, median, p99 in rows:
        print(f"  {label:<24} median {median:7.2f} ms   p99 {p99:7.2f} ms")
    print(f"  ratio (before / now, medians): {rows[0][1] / rows[1][1]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
