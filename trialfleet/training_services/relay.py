"""The relay: NNI's second metric channel, for trials whose files the manager cannot read where they are.

On a cluster whose storage is not mounted on the manager's machine, the trial keeper sends its trial
directory's files to the manager over HTTP (NNI's REST channel, on the manager's port + 1 unless configured),
and the relay mirrors them into the manager's own trial directory, ``<experiment dir>/trials/<attempt>/``. The
platform then reads that mirror exactly as it reads a local trial directory (:class:`~.trial_files.LocalTrialFiles`),
so metrics keep their exactly-once, in-order delivery through the same cursors.

Protocol (``trialfleet/trial_keeper/keeper.py`` speaks it): the append-only files — the metric stream,
``trial.stdout``, ``trial.stderr`` — are sent as ``PUT /relay/v1/trials/<attempt>/<file>?offset=N`` with the
bytes from offset ``N``; the relay appends what extends its copy and answers its new size, or 409 with its size
when ``N`` is past its end (it lost a tail in a crash: the keeper resends from there). Resending bytes it has is
harmless, so every retry is idempotent. Records (``keeper.json``, ``result.json``) are sent whole
(``PUT .../<file>?record=1``) and written atomically; ``result.json`` comes last, after every byte of the streams.
Every request carries ``Authorization: Bearer <secret>``, the experiment's keeper secret (``relay-secret`` in the
experiment directory, user-only), which reaches keepers in their ``command.json``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import secrets
import socket
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.trial_dir import (
    KEEPER_RECORD,
    METRICS_FILE,
    RESULT_RECORD,
    STDERR_FILE,
    STDOUT_FILE,
    write_record,
)
from trialfleet.training_services.trial_files import LocalTrialFiles, TrialFiles

if TYPE_CHECKING:
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)

API = "/relay/v1/trials"
SECRET_FILE = "relay-secret"
STREAMS = (METRICS_FILE, STDOUT_FILE, STDERR_FILE)
RECORDS = (KEEPER_RECORD, RESULT_RECORD)
MAX_CHUNK = 16 * 1024 * 1024  # a keeper sends at most this much per request
_ATTEMPT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def manager_address(configured: str | None) -> str:
    """The address workers reach this machine at: ``nniManagerIp`` when set, else the address of the
    interface that routes outwards (no packet is sent), else loopback."""
    if configured:
        return configured
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def relay_port(manager_port: int | None, configured: int | None) -> int:
    """NNI's REST channel listened on the manager's port + 1; a configured port wins; else any free one."""
    if configured is not None:
        return configured
    return manager_port + 1 if manager_port is not None else 0


def relay_secret(experiment_dir: Path) -> str:
    """The experiment's keeper secret, created (user-only) the first time."""
    path = experiment_dir / SECRET_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    secret = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    return secret


def append_at(path: Path, offset: int, data: bytes) -> int:
    """Append what of ``data`` (the file's bytes from ``offset``) extends ``path``; returns its new size, or
    raises :class:`GapError` when ``offset`` is past its end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if offset > size:
            raise GapError(size)
        fresh = data[size - offset :]
        if fresh:
            os.pwrite(fd, fresh, size)
        return size + len(fresh)
    finally:
        os.close(fd)


class GapError(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"offset past the end ({size})")
        self.size = size


class Relay:
    """The relay server of one experiment (see the module docstring), on the manager's event loop."""

    def __init__(self, experiment_dir: Path, *, host: str = "0.0.0.0", port: int = 0) -> None:
        self.trials_dir = experiment_dir / "trials"
        self.secret = relay_secret(experiment_dir)
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    async def start(self) -> None:
        import uvicorn

        self._socket = _bind(self.host, self.port)
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        log.info("relay: keepers send trial files to port %d", self.port)

    def url(self, address: str) -> str:
        """What a keeper reaches the relay at, given the address the manager is reached at."""
        host = f"[{address}]" if ":" in address else address
        return f"http://{host}:{self.port}{API}"

    def keeper_settings(self, attempt: str, address: str, *, patience: float = 3600.0) -> dict[str, Any]:
        """``command.json``'s ``relay`` for the keeper of the trial directory named ``attempt``."""
        return {"url": self.url(address), "secret": self.secret, "attempt": attempt, "patience": patience}

    def trial_files(self) -> TrialFiles:
        """The mirrors, read as local trial directories: a handle's ``trial_dir`` (a worker's path) is mapped
        to the mirror of the same attempt name."""
        return LocalTrialFiles(lambda trial_dir: self.trials_dir / PurePosixPath(trial_dir).name)

    async def close(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        if self._socket is not None:
            self._socket.close()

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[Route(API + "/{attempt}/{name:path}", self._put, methods=["PUT"])])

    async def _put(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), self.secret.encode()):
            return JSONResponse({"error": "a keeper's relay request needs the experiment's secret"}, 401)
        attempt, name = request.path_params["attempt"], request.path_params["name"]
        if not _ATTEMPT.fullmatch(attempt) or name not in (*STREAMS, *RECORDS):
            return JSONResponse({"error": f"no relayed file {attempt}/{name}"}, 404)
        body = await request.body()
        if len(body) > MAX_CHUNK:
            return JSONResponse({"error": f"a chunk is at most {MAX_CHUNK} bytes"}, 413)
        path = self.trials_dir / attempt / name
        if name in RECORDS:
            try:
                await asyncio.to_thread(_write_record, path, body)
            except ValueError:
                return JSONResponse({"error": f"{name}: expected a JSON object"}, 400)
            return JSONResponse({"size": len(body)})
        try:
            offset = int(request.query_params.get("offset", ""))
        except ValueError:
            return JSONResponse({"error": "offset: expected a whole number"}, 400)
        try:
            size = await asyncio.to_thread(append_at, path, offset, body)
        except GapError as gap:
            return JSONResponse({"size": gap.size}, 409)
        return JSONResponse({"size": size})


def _write_record(path: Path, body: bytes) -> None:
    record = json.loads(body)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_record(path, record)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PlatformError(
            f"the relay cannot listen on {host}:{port} ({exc.strerror}); set relayPort"
        ) from exc
    sock.listen(128)
    return sock
