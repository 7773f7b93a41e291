"""Creating an experiment on disk and starting its manager process (detached or in the foreground).

The CLI and the Python API both call these functions; the manager process itself is
``python -m trialfleet.manager`` (see ``process.py``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.config import ExperimentConfig
from trialfleet.errors import (
    ConfigError,
    ExperimentStateError,
    ManagerUnreachableError,
    PortInUseError,
    TrialfleetError,
)
from trialfleet.manager.decisions import new_experiment_id, valid_experiment_id
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore, manifest, secrets
from trialfleet.storage.manager_lock import manager_running

DEFAULT_PORT = 8080
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class Launched:
    experiment_id: str
    experiment_dir: Path
    url: str
    pid: int


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    bind_socket(port, host).close()


def bind_socket(port: int, host: str) -> socket.socket:
    """Bind the manager's listening socket up front so a busy port is reported before anything starts.
    ``host`` may be an IPv4 or IPv6 address or a name; ``0.0.0.0``/``::`` listen on every interface."""
    family, kind, address = _listen_target(host, port)
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise PortInUseError(
            f"port {port} on {host} is already in use ({exc.strerror}); choose another with --port"
        ) from exc
    sock.listen(128)
    return sock


def listen_address(host: str) -> str:
    """The address listening on ``host`` binds (a name resolved as ``bind_socket`` resolves it): whether it
    is loopback decides whether the server asks for the access token."""
    return str(_listen_target(host, 0)[2][0])


def _listen_target(host: str, port: int) -> tuple[socket.AddressFamily, socket.SocketKind, tuple[Any, ...]]:
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise TrialfleetError(f"cannot listen on {host!r}: {exc.strerror}; check --host") from exc
    return family, kind, address


def connect_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a manager listening on ``host`` (a wildcard address is
    reached through loopback; an IPv6 literal is bracketed)."""
    name = host.strip("[]")
    if name in ("", "0.0.0.0"):
        name = "127.0.0.1"
    elif name == "::":
        name = "::1"
    return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"


def create_experiment(config: ExperimentConfig, experiment_id: str | None = None) -> tuple[str, Path]:
    """Write the experiment's directory, database and manifest entry. Starts nothing."""
    if experiment_id is not None and not valid_experiment_id(experiment_id):
        raise ConfigError(
            f"experiment id {experiment_id!r} is not allowed: use 1 to 32 letters, digits, '_' or '-' (as NNI)"
        )
    experiment_id = experiment_id or new_experiment_id()
    experiment_dir = Path(config.experiment_working_directory).expanduser() / experiment_id
    if (experiment_dir / "db").exists():
        raise ExperimentStateError(f"experiment {experiment_id} already exists in {experiment_dir}")
    for sub in ("db", "log", "trials"):
        (experiment_dir / sub).mkdir(parents=True, exist_ok=True)
    stored, secret_values = secrets.stored_form(config)
    secrets.save(experiment_dir, secret_values)
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    try:
        store.init_experiment(experiment_id, stored, time.time())
    finally:
        store.close()
    _link_latest(experiment_dir)
    platform = _platform_name(config)
    manifest.upsert(
        experiment_id,
        experimentName=config.experiment_name or "",
        status=ExperimentStatus.INITIALIZED.value,
        platform=platform,
        experimentDir=str(experiment_dir),
        logDir=str(experiment_dir),
        startTime=int(time.time() * 1000),
        endTime=None,
        tag=[],
    )
    return experiment_id, experiment_dir


def _platform_name(config: ExperimentConfig) -> str:
    ts = config.training_service
    return "hybrid" if isinstance(ts, list) else str(ts.platform)


def _link_latest(experiment_dir: Path) -> None:
    latest = experiment_dir.parent / "_latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(experiment_dir.name)
    except OSError:
        pass  # a shared or read-only working directory: the link is a convenience only


def manager_command(
    experiment_dir: Path,
    action: str,
    port: int,
    host: str,
    debug: bool,
    public_read: bool = False,
    url_prefix: str = "",
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "trialfleet.manager",
        "--experiment-dir",
        str(experiment_dir),
        "--action",
        action,
        "--port",
        str(port),
        "--host",
        host,
    ]
    if debug:
        cmd.append("--debug")
    if public_read:
        cmd.append("--public-read")
    if url_prefix:
        cmd += ["--url-prefix", url_prefix]
    return cmd


def spawn_manager(
    experiment_dir: Path,
    action: str,
    port: int,
    host: str = "127.0.0.1",
    debug: bool = False,
    url_prefix: str = "",
    public_read: bool = False,
) -> Launched:
    """Start a detached manager process and wait until its REST server answers (under ``url_prefix``).
    Beyond loopback the experiment's access token (:mod:`trialfleet.access`) must exist already."""
    from trialfleet.access import read_token

    log_dir = experiment_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    prefix = url_prefix.strip("/")
    with open(log_dir / "nnictl_stdout.log", "ab") as out, open(log_dir / "nnictl_stderr.log", "ab") as err:
        proc = subprocess.Popen(
            manager_command(experiment_dir, action, port, host, debug, public_read, prefix),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    experiment_id = experiment_dir.name
    url = connect_url(host, port)
    ready_url = f"{url}/{prefix}" if prefix else url
    wait_ready(proc, ready_url, log_dir / "nnictl_stderr.log", token=read_token(experiment_dir))
    return Launched(experiment_id, experiment_dir, url, proc.pid)


def wait_ready(
    proc: subprocess.Popen[bytes],
    url: str,
    stderr_log: Path,
    timeout: float = READY_TIMEOUT,
    token: str | None = None,
) -> None:
    request = urllib.request.Request(f"{url}/api/v1/nni/check-status")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = stderr_log.read_text(errors="replace")[-3000:] if stderr_log.exists() else ""
            raise ManagerUnreachableError(f"the manager exited with code {code} while starting:\n{tail}")
        try:
            with urllib.request.urlopen(request, timeout=1) as resp:
                if json.load(resp).get("status") != "INITIALIZING":
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.02)
    raise ManagerUnreachableError(f"the manager did not answer at {url} within {timeout:.0f} s")


def stop_manager(pid: int, experiment_dir: Path, timeout: float = 60.0) -> bool:
    """SIGTERM the manager (it stops its trials) and wait until it let go of the experiment; True if it did."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not manager_running(experiment_dir):
            return True
        time.sleep(0.05)
    return False
