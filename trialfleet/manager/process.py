"""The manager process: one experiment's loop and its REST server on one asyncio loop.

Started as ``python -m trialfleet.manager --experiment-dir D --action create|resume|view --port P``
(detached by the CLI), or run in the foreground by ``trialfleet create --foreground``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trialfleet.access import AccessPolicy
from trialfleet.errors import TrialfleetError
from trialfleet.layout import log_files
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import bind_socket, connect_url
from trialfleet.status import ExperimentStatus
from trialfleet.storage import manifest
from trialfleet.storage.manager_lock import ManagerLock

log = logging.getLogger("trialfleet.manager")

_FINISHED = {ExperimentStatus.DONE, ExperimentStatus.ERROR}


#: NNI's logLevel names → logging's levels ("trace" is NNI's most verbose)
LOG_LEVELS = {
    "fatal": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}


#: the loggers NNI's dispatcher.log held: built-in and custom tuners and assessors
DISPATCHER_LOGGERS = ("trialfleet.tuning", "trialfleet.manager.driver", "nni")


def setup_logging(experiment_dir: Path, debug: bool, console: bool) -> None:
    files = log_files(experiment_dir)
    handlers: list[logging.Handler] = [logging.FileHandler(files.manager)]
    if console:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="[%(asctime)s] %(levelname)s (%(name)s) %(message)s",
        handlers=handlers,
        force=True,
    )
    if files.dispatcher is not None:
        dispatcher = logging.FileHandler(files.dispatcher)
        dispatcher.setFormatter(handlers[0].formatter)
        for name in DISPATCHER_LOGGERS:
            logging.getLogger(name).addHandler(dispatcher)


async def serve(
    experiment_dir: Path,
    action: str,
    sock: socket.socket,
    *,
    exit_when_finished: bool = False,
    public_read: bool = False,
    url_prefix: str = "",
) -> int:
    """Run the manager and its server until stopped; returns a process exit code. Beyond loopback the
    server asks for the experiment's access token (``public_read``: for changes only). The caller holds the
    experiment's lock (:func:`hold_experiment`)."""
    manager = ExperimentManager(experiment_dir, readonly=action == "view", port=sock.getsockname()[1])
    config = manager.config
    if not logging.getLogger().isEnabledFor(logging.DEBUG):  # --debug on the command line wins
        debug = config.debug or any(service.debug for service in config.training_services)
        logging.getLogger().setLevel(logging.DEBUG if debug else LOG_LEVELS[config.log_level])
    host, port = sock.getsockname()[:2]
    access = AccessPolicy.for_listening(host, experiment_dir, manager.experiment_id, public_read=public_read)
    # the prefix is this run's: a resumed or viewed experiment is served without the one it was created with
    manifest.upsert(
        manager.experiment_id,
        pid=os.getpid(),
        port=port,
        webuiUrl=[connect_url(host, port)],
        prefixUrl=url_prefix.strip("/") or None,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, manager.request_stop)
    try:
        await manager.start(resume=action == "resume")
    except TrialfleetError as exc:
        log.error("cannot start the experiment: %s", exc)
        manager.fail(str(exc))  # the server stays up so the error can be read until `stop`
    # The loop runs while a thread imports the web server (FastAPI: ~0.3 s of CPU), so the first trials start,
    # and are replaced as they end, meanwhile; the socket already listens and queues early requests.
    running = asyncio.create_task(manager.run())
    create_app = await asyncio.to_thread(_import_server)
    import uvicorn

    app = create_app(manager, access=access, url_prefix=url_prefix)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    server_task = asyncio.create_task(server.serve(sockets=[sock]))
    if exit_when_finished:
        watcher = asyncio.create_task(_stop_when_finished(manager))
    await running
    server.should_exit = True
    await server_task
    manifest.upsert(manager.experiment_id, pid=None, port=None)
    if exit_when_finished:
        watcher.cancel()
    return 1 if manager.error else 0


def hold_experiment(experiment_dir: Path) -> ManagerLock:
    """Take the experiment's lock for the rest of this process's life (the kernel releases it at exit, so
    whoever waits for it sees the process gone), or raise ExperimentStateError naming the holder."""
    lock = ManagerLock(experiment_dir)
    lock.acquire()
    with contextlib.suppress(OSError):  # its owner's only (docs/security.md); older versions left it open
        Path(experiment_dir).chmod(0o700)
    return lock


def _import_server() -> Callable[..., Any]:
    import uvicorn  # noqa: F401 - imported here, off the event loop's thread

    from trialfleet.server.app import create_app

    return create_app


async def _stop_when_finished(manager: ExperimentManager) -> None:
    await manager.wait_until(_FINISHED)
    manager.request_stop(keep_status=True)  # it finished: DONE (or ERROR) stays, not STOPPED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trialfleet.manager")
    parser.add_argument("--experiment-dir", required=True, type=Path)
    parser.add_argument("--action", choices=["create", "resume", "view"], default="create")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--foreground", action="store_true")
    parser.add_argument("--public-read", action="store_true", help="beyond loopback: reads need no token")
    parser.add_argument("--url-prefix", default="", help="serve the REST API and web UI under this path")
    args = parser.parse_args(argv)
    setup_logging(args.experiment_dir, args.debug, console=args.foreground)
    try:
        hold_experiment(args.experiment_dir)
        sock = bind_socket(args.port, args.host)
    except TrialfleetError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return asyncio.run(
        serve(
            args.experiment_dir,
            args.action,
            sock,
            exit_when_finished=args.foreground,
            public_read=args.public_read,
            url_prefix=args.url_prefix,
        )
    )
