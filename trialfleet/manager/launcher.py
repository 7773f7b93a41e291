"""Creating an experiment on disk and starting its manager process (detached or in the foreground).

The CLI and the Python API both call these functions; the manager process itself is
``python -m trialfleet.manager`` (see ``process.py``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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
    ListenError,
    ManagerUnreachableError,
    NoSpaceError,
    PortInUseError,
    TrialfleetError,
)
from trialfleet.layout import MANAGER_STDERR_LOG, MANAGER_STDOUT_LOG, log_files
from trialfleet.manager.decisions import new_experiment_id, valid_experiment_id
from trialfleet.manager.standby import StandbyManager
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore, manifest, secrets
from trialfleet.storage.disk import check_writable, write_error
from trialfleet.storage.manager_lock import manager_running

DEFAULT_PORT = 8080
PORT_RANGE = (1, 65535)
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class Launched:
    experiment_id: str
    experiment_dir: Path
    url: str
    pid: int
    status: str = ""  # the manager's first answer: RUNNING, or ERROR (the start failed; errors say why)
    errors: tuple[str, ...] = ()


#: how a command line user chooses the port; the Python API names its own parameter
PORT_OPTION = "--port"


def check_port_free(port: int, host: str = "127.0.0.1", port_option: str = PORT_OPTION) -> None:
    bind_socket(port, host, port_option).close()


def bind_socket(port: int, host: str, port_option: str = PORT_OPTION) -> socket.socket:
    """Bind the manager's listening socket up front so a bad or busy port, or a host that is not this
    machine's, is reported before anything starts. ``host`` may be an IPv4 or IPv6 address or a name;
    ``0.0.0.0``/``::`` listen on every interface. ``port_option``: what the error tells the user to change."""
    low, high = PORT_RANGE
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= high:
        # getaddrinfo would take 70000 for 70000 % 65536 and listen there
        raise ListenError(f"port {port!r} is not a TCP port: expected {low} to {high}; check {port_option}")
    family, kind, proto, address = _listen_target(host, port)
    # With proto 0 asyncio would not set TCP_NODELAY on the connections it accepts (it checks the socket's
    # proto), and a keep-alive request would wait ~40 ms for the client's delayed ACK (Nagle). The listening
    # socket gets the option too: accepted sockets inherit it.
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _bind_error(exc, host, port, str(address[0]), port_option) from exc
    sock.listen(128)
    return sock


def _bind_error(exc: OSError, host: str, port: int, address: str, port_option: str) -> ListenError:
    """What stopped the bind, in words: the port is taken, the host is not this machine's, or privileges."""
    if exc.errno == errno.EADDRINUSE:
        return PortInUseError(
            f"port {port} on {host} is already in use ({exc.strerror}); choose another with {port_option}"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        named = (
            f"{address} is" if host.strip("[]") == address else f"{host!r} resolves to {address}, which is"
        )
        return ListenError(
            f"cannot listen on {host!r}: {named} not an address of this machine ({exc.strerror}); check --host"
        )
    if exc.errno == errno.EACCES:
        return ListenError(
            f"cannot listen on port {port} of {host}: {exc.strerror} (ports below 1024 need privileges); "
            f"choose another with {port_option}"
        )
    return ListenError(f"cannot listen on port {port} of {host}: {exc.strerror or exc}")


def listen_address(host: str) -> str:
    """The address listening on ``host`` binds (a name resolved as ``bind_socket`` resolves it): whether it
    is loopback decides whether the server asks for the access token."""
    return str(_listen_target(host, 0)[3][0])


def _listen_target(
    host: str, port: int
) -> tuple[socket.AddressFamily, socket.SocketKind, int, tuple[Any, ...]]:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ListenError(
            f"cannot listen on {host!r}: the host name does not resolve ({exc.strerror}); check --host"
        ) from exc
    return family, kind, proto, address


def connect_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a manager listening on ``host`` (a wildcard address is
    reached through loopback; an IPv6 literal is bracketed)."""
    name = host.strip("[]")
    if name in ("", "0.0.0.0"):
        name = "127.0.0.1"
    elif name == "::":
        name = "::1"
    return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"


HOME_HINT = "set TRIALFLEET_HOME to a directory you can write"
WORKING_DIRECTORY_HINT = "set experimentWorkingDirectory in the config to a directory you can write"


def create_experiment(config: ExperimentConfig, experiment_id: str | None = None) -> tuple[str, Path]:
    """Write the experiment's directory, database and manifest entry — all of them or nothing. Starts nothing.

    TRIALFLEET_HOME and the working directory are checked first (DirectoryError names the one that cannot be
    written and why); the directory is built under a temporary name beside its place, user-only (0700: it
    holds the config's secrets and the trials' data), and renamed into place; the manifest entry is written
    once it is there. A failure removes what was made, including working-directory levels made for it.
    """
    if experiment_id is not None and not valid_experiment_id(experiment_id):
        raise ConfigError(
            f"experiment id {experiment_id!r} is not allowed: use 1 to 32 letters, digits, '_' or '-' (as NNI)"
        )
    experiment_id = experiment_id or new_experiment_id()
    working_dir = Path(config.experiment_working_directory).expanduser().absolute()
    check_writable(manifest.trialfleet_home(), "TRIALFLEET_HOME", HOME_HINT)
    check_writable(working_dir, "the experiment working directory", WORKING_DIRECTORY_HINT)
    experiment_dir = working_dir / experiment_id
    if experiment_dir.exists() or experiment_dir.is_symlink():
        raise ExperimentStateError(f"experiment {experiment_id} already exists in {experiment_dir}")
    made: list[Path] = []
    try:
        made = _make_directories(working_dir)
        staging = Path(tempfile.mkdtemp(prefix=f".{experiment_id}.", suffix=".creating", dir=working_dir))
        try:
            _fill_experiment_dir(staging, experiment_id, config)
            os.rename(staging, experiment_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except NoSpaceError as exc:  # named by the device's place, not the temporary name the database had
        _remove_empty(made)
        raise NoSpaceError(working_dir) from exc
    except OSError as exc:
        _remove_empty(made)
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # the same id, created meanwhile
            raise ExperimentStateError(
                f"experiment {experiment_id} already exists in {experiment_dir}"
            ) from exc
        raise write_error(exc, working_dir, "the experiment working directory") from exc
    except BaseException:
        _remove_empty(made)
        raise
    try:
        manifest.upsert(
            experiment_id,
            experimentName=config.experiment_name or "",
            status=ExperimentStatus.INITIALIZED.value,
            platform=_platform_name(config),
            experimentDir=str(experiment_dir),
            logDir=str(experiment_dir),
            startTime=int(time.time() * 1000),
            endTime=None,
            tag=[],
        )
    except BaseException:
        shutil.rmtree(experiment_dir, ignore_errors=True)
        _remove_empty(made)
        raise
    return experiment_id, experiment_dir


def _fill_experiment_dir(directory: Path, experiment_id: str, config: ExperimentConfig) -> None:
    for sub in ("db", "log", "trials"):
        (directory / sub).mkdir()
    stored, secret_values = secrets.stored_form(config)
    secrets.save(directory, secret_values)
    store = ExperimentStore.for_experiment_dir(directory)
    try:
        store.init_experiment(experiment_id, stored, time.time())
    finally:
        store.close()


def _make_directories(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents; returns those this call made, outermost first."""
    missing = []
    for level in (directory, *directory.parents):
        if level.exists():
            break
        missing.append(level)
    made = []
    for level in reversed(missing):
        try:
            level.mkdir()
        except FileExistsError:
            continue  # made meanwhile by someone else: not ours to remove
        made.append(level)
    return made


def _remove_empty(directories: list[Path]) -> None:
    for level in reversed(directories):
        try:
            level.rmdir()
        except OSError:
            return


def discard_unstarted(experiment_dir: Path) -> bool:
    """Remove an experiment whose manager never ran it (still INITIALIZED, no manager holds it): what a launch
    that failed before its manager started leaves. An experiment the manager put in ERROR stays. True if
    removed."""
    if manager_running(experiment_dir):
        return False
    try:
        store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
        try:
            row = store.experiment()
        finally:
            store.close()
    except TrialfleetError:
        return False
    if row.status is not ExperimentStatus.INITIALIZED:
        return False
    shutil.rmtree(experiment_dir, ignore_errors=True)
    manifest.remove(row.id)
    return True


def _platform_name(config: ExperimentConfig) -> str:
    ts = config.training_service
    return "hybrid" if isinstance(ts, list) else str(ts.platform)


def link_latest(experiment_dir: Path) -> None:
    """``<working directory>/_latest`` → the experiment started last."""
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
    sock: socket.socket | None = None,
    standby: StandbyManager | None = None,
) -> Launched:
    """Start a detached manager process and wait until its REST server answers (under ``url_prefix``).
    ``sock``: the listening socket, already bound by the caller, which the manager inherits (no one can take
    the port meanwhile); without it the manager binds ``port`` itself. ``standby``: a manager process started
    earlier (:mod:`trialfleet.manager.standby`), handed this experiment instead of starting one. Beyond
    loopback the experiment's access token (:mod:`trialfleet.access`) must exist already."""
    from trialfleet.access import read_token

    log_dir = experiment_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    prefix = url_prefix.strip("/")
    fds = (sock.fileno(),) if sock is not None else ()
    command = manager_command(experiment_dir, action, port, host, debug, public_read, prefix)
    with open(log_dir / MANAGER_STDOUT_LOG, "ab") as out, open(log_dir / MANAGER_STDERR_LOG, "ab") as err:
        start = err.tell()
        # the standby gets the arguments that follow `python -m trialfleet.manager`
        if standby is not None and standby.hand(command[3:], sock):
            proc = standby.proc
        else:
            proc = subprocess.Popen(
                command + (["--socket-fd", str(fds[0])] if fds else []),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=fds,
            )
    experiment_id = experiment_dir.name
    url = connect_url(host, port)
    ready_url = f"{url}/{prefix}" if prefix else url
    state = wait_ready(proc, ready_url, experiment_dir, token=read_token(experiment_dir), stderr_from=start)
    return Launched(
        experiment_id,
        experiment_dir,
        url,
        proc.pid,
        str(state.get("status", "")),
        tuple(state.get("errors", ())),
    )


def wait_ready(
    proc: subprocess.Popen[bytes],
    url: str,
    experiment_dir: Path,
    timeout: float = READY_TIMEOUT,
    token: str | None = None,
    stderr_from: int = 0,
) -> dict[str, Any]:
    """Wait until the manager's REST server answers with a status other than INITIALIZING; returns NNI's
    ``{status, errors}``. ManagerUnreachableError if the manager exits first (with what it wrote to its stderr log
    since ``stderr_from``) or does not answer in time."""
    request = urllib.request.Request(f"{url}/api/v1/nni/check-status")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise ManagerUnreachableError(_exited_while_starting(code, experiment_dir, stderr_from))
        try:
            with urllib.request.urlopen(request, timeout=1) as resp:
                state = json.load(resp)
                if isinstance(state, dict) and state.get("status") != "INITIALIZING":
                    return state
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.02)
    raise ManagerUnreachableError(f"the manager did not answer at {url} within {timeout:.0f} s")


def _exited_while_starting(code: int, experiment_dir: Path, offset: int) -> str:
    """What the manager wrote to stderr since ``offset``; else the reason it recorded as it stopped (its log
    and the experiment's error, see :func:`trialfleet.manager.process.record_last_words`)."""
    stderr_log = experiment_dir / "log" / MANAGER_STDERR_LOG
    try:
        with open(stderr_log, "rb") as err:
            err.seek(offset)
            tail = err.read()[-3000:].decode(errors="replace").strip()
    except OSError as exc:
        tail = f"(its stderr, {stderr_log}, cannot be read: {exc.strerror})"
    said = f"the manager exited with code {code} while starting"
    if tail.startswith("error: ") and "\n" not in tail:  # its own refusal (trialfleet.manager.process)
        return f"{said}: {tail.removeprefix('error: ')}"
    if tail:
        return f"{said}:\n{tail}"
    reason = _recorded_error(experiment_dir)
    log_file = log_files(experiment_dir).manager
    if reason:
        return f"{said}: {reason} (see {log_file})"
    return f"{said} and recorded no reason (see {log_file})"


def _recorded_error(experiment_dir: Path) -> str | None:
    import sqlite3

    from trialfleet.storage import DB_RELATIVE_PATH, ExperimentStore

    if not (experiment_dir / DB_RELATIVE_PATH).exists():
        return None
    try:  # a database that cannot be read is the reason (a corrupt one: what is wrong, how to recover)
        store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
        try:
            return store.experiment().error
        finally:
            store.close()
    except TrialfleetError as exc:
        return str(exc)
    except (OSError, sqlite3.Error) as exc:
        return f"its database cannot be read: {exc}"


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
