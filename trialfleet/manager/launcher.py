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

from trialfleet.config import ExperimentConfig
from trialfleet.errors import ExperimentStateError, ManagerUnreachableError, PortInUseError
from trialfleet.manager.decisions import new_experiment_id
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore, manifest

DEFAULT_PORT = 8080
#: the manager process's URL prefix (``--url_prefix``), read by ``trialfleet.server.app.create_app``
URL_PREFIX_ENV = "TRIALFLEET_URL_PREFIX"
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class Launched:
    experiment_id: str
    experiment_dir: Path
    url: str
    pid: int


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on {host} is already in use ({exc.strerror}); choose another with --port"
            ) from exc


def bind_socket(port: int, host: str) -> socket.socket:
    """Bind the manager's listening socket up front so a busy port is reported before anything starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PortInUseError(
            f"port {port} on {host} is already in use ({exc.strerror}); choose another with --port"
        ) from exc
    sock.listen(128)
    return sock


def create_experiment(config: ExperimentConfig, experiment_id: str | None = None) -> tuple[str, Path]:
    """Write the experiment's directory, database and manifest entry. Starts nothing."""
    experiment_id = experiment_id or new_experiment_id()
    experiment_dir = Path(config.experiment_working_directory).expanduser() / experiment_id
    if (experiment_dir / "db").exists():
        raise ExperimentStateError(f"experiment {experiment_id} already exists in {experiment_dir}")
    for sub in ("db", "log", "trials"):
        (experiment_dir / sub).mkdir(parents=True, exist_ok=True)
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    try:
        store.init_experiment(experiment_id, config.to_json(include_secrets=True), time.time())
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


def manager_command(experiment_dir: Path, action: str, port: int, host: str, debug: bool) -> list[str]:
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
    return [*cmd, "--debug"] if debug else cmd


def spawn_manager(
    experiment_dir: Path,
    action: str,
    port: int,
    host: str = "127.0.0.1",
    debug: bool = False,
    url_prefix: str = "",
) -> Launched:
    """Start a detached manager process and wait until its REST server answers (under ``url_prefix``)."""
    log_dir = experiment_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    prefix = url_prefix.strip("/")
    with open(log_dir / "nnictl_stdout.log", "ab") as out, open(log_dir / "nnictl_stderr.log", "ab") as err:
        proc = subprocess.Popen(
            manager_command(experiment_dir, action, port, host, debug),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            env={**os.environ, URL_PREFIX_ENV: prefix},
        )
    experiment_id = experiment_dir.name
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"
    wait_ready(proc, f"{url}/{prefix}" if prefix else url, log_dir / "nnictl_stderr.log")
    return Launched(experiment_id, experiment_dir, url, proc.pid)


def wait_ready(
    proc: subprocess.Popen[bytes], url: str, stderr_log: Path, timeout: float = READY_TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = stderr_log.read_text(errors="replace")[-3000:] if stderr_log.exists() else ""
            raise ManagerUnreachableError(f"the manager exited with code {code} while starting:\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/api/v1/nni/check-status", timeout=1) as resp:
                if json.load(resp).get("status") != "INITIALIZING":
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.02)
    raise ManagerUnreachableError(f"the manager did not answer at {url} within {timeout:.0f} s")


def stop_manager(pid: int, timeout: float = 60.0) -> bool:
    """SIGTERM the manager (it stops its trials) and wait for it to exit; True if it did."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not manifest.pid_alive(pid) or _is_zombie(pid):
            return True
        time.sleep(0.05)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
