"""The manager process: one experiment's loop and its REST server on one asyncio loop.

Started as ``python -m trialfleet.manager --experiment-dir D --action create|resume|view --port P``
(detached by the CLI), or run in the foreground by ``trialfleet create --foreground``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import importlib
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trialfleet.access import AccessPolicy
from trialfleet.config import ExperimentConfig
from trialfleet.errors import TrialfleetError
from trialfleet.layout import NniLogFormat, log_files
from trialfleet.manager.experiment_manager import ExperimentManager, why_stopped
from trialfleet.manager.launcher import bind_socket, connect_url
from trialfleet.status import ExperimentStatus
from trialfleet.storage import ExperimentStore, manifest
from trialfleet.storage.disk import release_space, reserve_space
from trialfleet.storage.manager_lock import ManagerLock
from trialfleet.training_services.base import get_training_service_class

log = logging.getLogger("trialfleet.manager")

_FINISHED = {ExperimentStatus.DONE, ExperimentStatus.ERROR}
#: signals that end the manager in ERROR, saying which (SIGTERM, SIGINT and SIGHUP stop it; SIGKILL says nothing)
FATAL_SIGNALS = (signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


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


class _LogFile(logging.FileHandler):
    """A log file whose lines that cannot be written (a full disk) go to stderr instead."""

    def handleError(self, record: logging.LogRecord) -> None:  # logging's name
        try:
            sys.stderr.write(f"{self.format(record)}\n(not written to {self.baseFilename})\n")
            sys.stderr.flush()
        except Exception:  # nowhere left to say it
            pass


#: libraries whose INFO is chatter: asyncssh writes five lines for every SSH session it opens, and a remote trial
#: without reuse opens one to launch (two thirds of a remote experiment's log). Their warnings stay.
CHATTY_LOGGERS = ("asyncssh",)


def set_log_level(level: int) -> None:
    """The experiment's ``logLevel`` (or ``debug``); the chatty libraries say only their warnings unless
    debugging."""
    logging.getLogger().setLevel(level)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))


def setup_logging(experiment_dir: Path, debug: bool, console: bool) -> None:
    files = log_files(experiment_dir)
    handlers: list[logging.Handler] = [_LogFile(files.manager)]
    if console:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="[%(asctime)s] %(levelname)s (%(name)s) %(message)s",
        handlers=handlers,
        force=True,
    )
    if files.dispatcher is not None:
        handlers[0].setFormatter(NniLogFormat())
        dispatcher = _LogFile(files.dispatcher)
        dispatcher.setFormatter(handlers[0].formatter)
        for name in DISPATCHER_LOGGERS:
            logging.getLogger(name).addHandler(dispatcher)


async def serve(
    experiment_dir: Path,
    action: str,
    sock: socket.socket,
    *,
    load_app: AppLoader,
    exit_when_finished: bool = False,
    public_read: bool = False,
    url_prefix: str = "",
) -> int:
    """Run the manager and its server until stopped; returns a process exit code. ``load_app`` imports the web
    server and returns its app factory (the entry point's :func:`trialfleet.server.load_app`: the manager imports
    nothing above it). Beyond loopback the server asks for the experiment's access token (``public_read``: for
    changes only). The caller holds the experiment's lock (:func:`hold_experiment`)."""
    manager = ExperimentManager(experiment_dir, readonly=action == "view", port=sock.getsockname()[1])
    config = manager.config
    if not logging.getLogger().isEnabledFor(logging.DEBUG):  # --debug on the command line wins
        debug = config.debug or any(service.debug for service in config.training_services)
        set_log_level(logging.DEBUG if debug else LOG_LEVELS[config.log_level])
    host, port = sock.getsockname()[:2]
    access = AccessPolicy.for_listening(host, experiment_dir, manager.experiment_id, public_read=public_read)
    # the prefix is this run's: a resumed or viewed experiment is served without the one it was created with
    manifest.upsert(
        manager.experiment_id,
        pid=os.getpid(),
        port=port,
        webuiUrl=[connect_url(host, port)],
        prefixUrl=url_prefix.strip("/") or None,
        **_shown_status(manager),
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, manager.request_stop)
    for sig in FATAL_SIGNALS:  # their default would end the process without a word
        loop.add_signal_handler(sig, manager.abort, f"the manager received {sig.name}")
    # light preparation: the server is imported while the platforms prepare, once the tuner is built (Optuna's
    # import beside it took twice as long)
    server_import = ServerImport(load_app)
    on_tuner_built = server_import.start if action != "view" and _light_preparation(config) else None
    if action == "view":
        server_import.start()
    try:
        if action != "view":
            reserve_space(experiment_dir)  # room to say why, should the disk fill up
        await manager.start(resume=action == "resume", on_tuner_built=on_tuner_built)
    except TrialfleetError as exc:
        log.error("cannot start the experiment: %s", exc)
        manager.fail(str(exc))  # the server stays up so the error can be read until `stop`
    # The loop runs while a thread imports the web server (FastAPI: ~0.3 s of CPU), so the first trials start,
    # and are replaced as they end, meanwhile; the socket already listens and queues early requests.
    running = asyncio.create_task(manager.run())
    create_app = await server_import.result()
    import uvicorn

    app = create_app(manager, access=access, url_prefix=url_prefix)
    # lifespan on: at its shutdown the app closes the read-only connections it opened. The shutdown waits for
    # requests under way at most SHUTDOWN_GRACE s: a client reading a log at 1 kB/s would hold it for hours
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=SHUTDOWN_GRACE)
    )
    server_task = asyncio.create_task(server.serve(sockets=[sock]))
    if exit_when_finished:
        watcher = asyncio.create_task(_stop_when_finished(manager))
    await running
    server.should_exit = True
    await server_task
    await asyncio.to_thread(app.state.tensorboard.stop_all)  # TensorBoards end with their manager
    if exit_when_finished:
        watcher.cancel()
    release_space(experiment_dir)
    manifest.upsert(manager.experiment_id, pid=None, port=None, **_shown_status(manager, ended=True))
    # closed, not left to the process's end: the last connection to close folds the write-ahead log into the
    # database file, which then holds everything on its own
    manager.store.close()
    return 1 if manager.error else 0


#: how long the server's shutdown waits for requests still being answered (a stream ends when the experiment
#: stops, at its next chunk; one whose client reads nothing is cut off after this)
SHUTDOWN_GRACE = 5


def record_last_words(experiment_dir: Path, exc: BaseException) -> str:
    """The manager ends on an error its loop did not handle: say why — in the log (stderr when the log cannot
    be written), the experiment's error and the manifest, as far as each can be written (the reserved space is
    given back first). Returns the reason."""
    release_space(experiment_dir)
    reason = why_stopped(exc, experiment_dir)
    log.error("the manager stops: %s", reason, exc_info=exc)
    try:
        store = ExperimentStore.for_experiment_dir(experiment_dir)
        try:
            experiment = store.experiment()
            now = time.time()
            if experiment.status is not ExperimentStatus.ERROR or not experiment.error:
                store.update_experiment(
                    now=now,
                    event="EXPERIMENT_ERROR",
                    status=ExperimentStatus.ERROR.value,
                    error=reason,
                    end_time=now,
                )
        finally:
            store.close()
        manifest.upsert(
            experiment.id, status=ExperimentStatus.ERROR.value, endTime=int(now * 1000), pid=None, port=None
        )
    except Exception as second:  # the log line above is then all there is
        log.error("the experiment's error cannot be recorded: %s", why_stopped(second, experiment_dir))
    return reason


def _shown_status(manager: ExperimentManager, *, ended: bool = False) -> dict[str, str]:
    """What ``experiment list`` shows of a viewed experiment: VIEWED as REST says, its stored status after."""
    if not manager.readonly:
        return {}
    return {"status": manager.store.experiment().status.value if ended else ExperimentStatus.VIEWED.value}


def inherited_socket(fd: int) -> socket.socket:
    """The listening socket ``create`` bound and handed over. Not passed on: a trial holding it would keep the
    port taken after the manager ended, and a resume could not listen there again."""
    sock = socket.socket(fileno=fd)
    sock.set_inheritable(False)
    return sock


def hold_experiment(experiment_dir: Path) -> ManagerLock:
    """Take the experiment's lock for the rest of this process's life (the kernel releases it at exit, so
    whoever waits for it sees the process gone), or raise ExperimentStateError naming the holder."""
    lock = ManagerLock(experiment_dir)
    lock.acquire()
    with contextlib.suppress(OSError):  # its owner's only (docs/security.md); older versions left it open
        Path(experiment_dir).chmod(0o700)
    return lock


def _light_preparation(config: ExperimentConfig) -> bool:
    """Whether every platform of the experiment prepares without work of the manager's (``local``), so that the
    web server can be imported meanwhile. A remote fleet's preparation imports asyncssh and opens SSH connections
    from the manager's one core of Python: a server import beside it slowed the first trial by 0.15-0.2 s."""
    try:
        return all(
            get_training_service_class(block.platform).light_preparation for block in config.training_services
        )
    except TrialfleetError:  # the platform cannot be loaded: starting the experiment says so
        return True


def preload(config_file: str | None, orders_fd: int | None = None) -> None:
    """In a standby manager: import what the experiment being created starts with, so that none of it is on the way
    to the first trial once the orders come.

    First the config's platforms (``local``, the one nearly every experiment runs on, when no config is known) with
    what their start imports (``preload_modules``): the first thing the start does. Then, while the orders have not
    come (``orders_fd`` not yet readable), the tuning package and each built-in algorithm the config names with the
    library it is built on (``requires``: Optuna for TPE, ~0.35 s). Once the orders are there, the driver's thread
    imports those while the platforms prepare. A name that cannot be loaded is left for the start to report; a
    custom algorithm (``className``) is the user's code, imported by the start."""
    from trialfleet.config.loader import declared

    hints = declared(config_file) if config_file is not None else None
    for name in dict.fromkeys(hints.platforms if hints is not None else ["local"]):
        try:
            for module in get_training_service_class(name).preload_modules:
                importlib.import_module(module)
        except (TrialfleetError, ImportError):
            continue
    if hints is None:
        return
    for modules in _algorithm_modules(hints.algorithms):
        if orders_fd is not None and select.select([orders_fd], [], [], 0)[0]:
            return
        try:
            for module in modules:
                importlib.import_module(module)
        except ImportError:  # the start says what is missing
            continue


def _algorithm_modules(algorithms: list[tuple[str, str]]) -> Iterator[tuple[str, ...]]:
    """The modules to import for the tuning package, then for each built-in algorithm named (with its library)."""
    yield ("trialfleet.tuning",)
    from trialfleet.tuning.catalog import find_builtin

    for kind, name in algorithms:
        entry = find_builtin(name, "tuner" if kind == "advisor" else kind)
        if entry is not None and not entry.missing_requirements():
            yield (entry.target.partition(":")[0], *entry.requires)


#: imports the web server (in a thread, off the loop) and returns its app factory, ``create_app(manager, *, access,
#: url_prefix)``
AppLoader = Callable[[], Callable[..., Any]]


class ServerImport:
    """The web server's modules (FastAPI: ~0.2 s of CPU), imported in a thread while the loop goes on: while
    the platforms prepare if that is light work (:func:`_light_preparation`), from when the tuner is built, else
    once they are prepared.

    An import holds the GIL between its file reads, so the loop's thread, each time it gives the GIL up for
    a system call, waits for the switch interval (5 ms) to have it back: the first trials started 70-100 ms
    apart instead of 7. Meanwhile the interval is 0.1 ms."""

    def __init__(self, load_app: AppLoader) -> None:
        self._load_app = load_app
        self._done: concurrent.futures.Future[Callable[..., Any]] = concurrent.futures.Future()
        self._started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            threading.Thread(target=self._run, name="import-server", daemon=True).start()

    async def result(self) -> Callable[..., Any]:
        self.start()
        return await asyncio.wrap_future(self._done)

    def _run(self) -> None:
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, 1e-4))
        try:
            self._done.set_result(self._load_app())
        except BaseException as exc:  # re-raised where the server is made
            self._done.set_exception(exc)
        finally:
            sys.setswitchinterval(interval)


async def _stop_when_finished(manager: ExperimentManager) -> None:
    await manager.wait_until(_FINISHED)
    manager.request_stop(keep_status=True)  # it finished: DONE (or ERROR) stays, not STOPPED


def main(load_app: AppLoader, argv: list[str] | None = None) -> int:
    """The manager process, given the web server's loader by its entry point (``python -m trialfleet.manager``)."""
    parser = argparse.ArgumentParser(prog="python -m trialfleet.manager")
    parser.add_argument("--experiment-dir", type=Path, help="required, unless the --orders-fd bring it")
    parser.add_argument("--action", choices=["create", "resume", "view"], default="create")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--foreground", action="store_true")
    parser.add_argument("--public-read", action="store_true", help="beyond loopback: reads need no token")
    parser.add_argument("--url-prefix", default="", help="serve the REST API and web UI under this path")
    parser.add_argument("--socket-fd", type=int, help="listen on this inherited socket, already bound")
    parser.add_argument(
        "--orders-fd", type=int, help="a standby manager: wait for the arguments on this socket"
    )
    parser.add_argument(
        "--preload-for",
        metavar="CONFIG",
        help="a standby manager: import the platforms and algorithms this config names",
    )
    args = parser.parse_args(argv)
    if args.orders_fd is not None:
        # idle until the orders come: meanwhile the platforms, and the algorithms until the orders are there, are
        # imported (the web server waits for them: on a platform other than local it would be in the way of the
        # first trial)
        preload(args.preload_for, args.orders_fd)
        from trialfleet.manager.standby import await_orders

        orders = await_orders(args.orders_fd)
        if orders is None:  # no experiment came: nothing was opened or written
            return 0
        args = parser.parse_args(orders)
    if args.experiment_dir is None:
        parser.error("the following arguments are required: --experiment-dir")
    setup_logging(args.experiment_dir, args.debug, console=args.foreground)
    try:
        hold_experiment(args.experiment_dir)
        sock = (
            inherited_socket(args.socket_fd)
            if args.socket_fd is not None
            else bind_socket(args.port, args.host)
        )
    except TrialfleetError as exc:  # another manager has the experiment, or the port: nothing to record
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        return asyncio.run(
            serve(
                args.experiment_dir,
                args.action,
                sock,
                load_app=load_app,
                exit_when_finished=args.foreground,
                public_read=args.public_read,
                url_prefix=args.url_prefix,
            )
        )
    except Exception as exc:  # whatever it is, the manager says why it ends
        record_last_words(args.experiment_dir, exc)
        return 1
