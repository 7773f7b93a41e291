"""Keep-alive requests are answered without Nagle's delay: every connection the manager's server (and the
relay) accepts has TCP_NODELAY, so a response is not held back waiting for the client's delayed ACK
(a keep-alive request took ~44 ms). Timings are measured in bench/ (``python -m bench.keepalive``)."""

from __future__ import annotations

import asyncio
import http.client
import os
import socket
from pathlib import Path

import pytest

from tests.unit.server.conftest import API, make_config
from trialfleet.manager.launcher import bind_socket, create_experiment
from trialfleet.manager.process import serve
from trialfleet.server import load_app
from trialfleet.training_services.relay import API as RELAY_API
from trialfleet.training_services.relay import Relay

REQUESTS = 50


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepted_from(client: tuple[str, int]) -> socket.socket:
    """A duplicate of the socket this process accepted from ``client``, found among its own descriptors."""
    for name in os.listdir("/proc/self/fd"):
        try:
            duplicate = os.dup(int(name))
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        try:
            sock = socket.socket(fileno=duplicate)
        except OSError:
            os.close(duplicate)
            continue  # not a socket
        try:
            if sock.type == socket.SOCK_STREAM and sock.getpeername() == client:
                return sock
        except OSError:
            pass  # not connected
        sock.close()
    raise AssertionError(f"no accepted connection from {client}")


def keep_alive_requests(port: int, method: str, path: str, **headers: str) -> int:
    """``REQUESTS`` requests on one connection (``{n}`` in ``path``: the request's number; a PUT sends one
    byte); the server side's TCP_NODELAY, read after each of them."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        options = set()
        local = None
        for sequence in range(REQUESTS):
            body = b"x" if method == "PUT" else None
            connection.request(method, path.format(n=sequence), body=body, headers=headers)
            response = connection.getresponse()
            assert response.status == 200, response.read()
            response.read()
            assert local in (None, connection.sock.getsockname()), "the connection was not kept alive"
            local = connection.sock.getsockname()
            with accepted_from(local) as accepted:
                options.add(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        (option,) = options
        return option
    finally:
        connection.close()


def stop(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("DELETE", f"{API}/experiment")
    assert connection.getresponse().status == 200
    connection.close()


@pytest.mark.slow
async def test_a_live_managers_keep_alive_connections_have_no_delay(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    (Path(config.training_services[0].trial_code_directory) / "hold").touch()
    _, experiment_dir = create_experiment(config)
    sock = bind_socket(free_port(), "127.0.0.1")  # as `python -m trialfleet.manager` binds it
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    port = sock.getsockname()[1]
    manager = asyncio.create_task(serve(experiment_dir, "create", sock, load_app=load_app))
    try:
        option = await asyncio.to_thread(keep_alive_requests, port, "GET", f"{API}/check-status")
    finally:
        await asyncio.to_thread(stop, port)
        assert await asyncio.wait_for(manager, 60) == 0
    assert option != 0, "the manager's server accepted a connection without TCP_NODELAY"


async def test_the_relays_keep_alive_connections_have_no_delay(tmp_path: Path) -> None:
    relay = Relay(tmp_path, host="127.0.0.1")
    await relay.start()
    try:
        path = f"{RELAY_API}/attempt-1/trial.stdout?offset={{n}}"
        headers = {"Authorization": f"Bearer {relay.secret}", "Content-Type": "application/octet-stream"}
        option = await asyncio.to_thread(keep_alive_requests, relay.port, "PUT", path, **headers)
    finally:
        await relay.close()
    assert option != 0, "the relay accepted a connection without TCP_NODELAY"
    assert (tmp_path / "trials" / "attempt-1" / "trial.stdout").read_text() == "x" * REQUESTS
