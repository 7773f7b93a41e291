"""``create``, ``resume``, ``view`` and ``stop``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from trialfleet.cli.output import console, success, warning, yellow_ruled

if TYPE_CHECKING:
    import socket

    from trialfleet.client import ExperimentRef
    from trialfleet.config import ExperimentConfig

DEFAULT_PORT = 8080
HOST = "127.0.0.1"

PortOption = typer.Option(DEFAULT_PORT, "--port", "-p", help="port of the web UI and REST API")
DebugOption = typer.Option(False, "--debug", "-d", help="debug logging (and tracebacks on errors)")
ForegroundOption = typer.Option(False, "--foreground", "-f", help="run the manager in this terminal")
UrlPrefixOption = typer.Option(None, "--url_prefix", "-u", help="serve the web UI and API under this path")
ExperimentDirOption = typer.Option(
    None,
    "--experiment_dir",
    "-e",
    help="the working directory holding the experiment (if not in the manifest)",
)


def register(app: typer.Typer) -> None:
    app.command()(create)
    app.command()(resume)
    app.command()(view)
    app.command()(stop)


def create(
    config: Path = typer.Option(..., "--config", "-c", help="the experiment config (YAML, v2 or legacy v1)"),
    port: int = PortOption,
    debug: bool = DebugOption,
    foreground: bool = ForegroundOption,
    url_prefix: str | None = UrlPrefixOption,
) -> None:
    """Create an experiment from a config file and start it."""
    from trialfleet.config import load_config

    def show_converted(converted: str) -> None:
        warning("You are using a legacy (v1) config file; this is its v2 form, please update the file:")
        yellow_ruled(converted)

    loaded = load_config(config, on_converted=show_converted)
    for message in loaded.warnings:
        warning(message)
    if foreground:
        _create_in_foreground(loaded.config, port, debug, url_prefix)
        return
    from trialfleet import startup

    _, experiment_dir = startup.create_checked(loaded.config, port, host=HOST)
    console().print("Starting the manager...")
    launched = startup.spawn(experiment_dir, "create", port, debug=debug, url_prefix=url_prefix, host=HOST)
    _print_started(launched.experiment_id, launched.url, url_prefix)


def _create_in_foreground(config: ExperimentConfig, port: int, debug: bool, url_prefix: str | None) -> None:
    from trialfleet import startup
    from trialfleet.manager.launcher import bind_socket, create_experiment

    startup.preflight(config)
    sock = bind_socket(port, HOST)
    try:
        experiment_id, experiment_dir = create_experiment(config)
    except BaseException:
        sock.close()
        raise
    _run_foreground(experiment_id, experiment_dir, "create", sock, debug, url_prefix)


def _run_foreground(
    experiment_id: str,
    experiment_dir: Path,
    action: str,
    sock: socket.socket,
    debug: bool,
    url_prefix: str | None,
) -> None:
    import os

    from trialfleet.cli import foreground
    from trialfleet.manager.launcher import URL_PREFIX_ENV
    from trialfleet.storage import manifest

    if url_prefix:
        os.environ[URL_PREFIX_ENV] = url_prefix
        manifest.upsert(experiment_id, prefixUrl=url_prefix.strip("/"))
    _print_started(experiment_id, f"http://{HOST}:{sock.getsockname()[1]}", url_prefix, foreground=True)
    code = foreground.run(experiment_dir, action, sock, debug)
    raise typer.Exit(code)


def _print_started(experiment_id: str, url: str, url_prefix: str | None, *, foreground: bool = False) -> None:
    base = f"{url}/{url_prefix.strip('/')}" if url_prefix and url_prefix.strip("/") else url
    out = console()
    out.print(f"Experiment ID: [bold]{experiment_id}[/bold]")
    out.print(f"Web portal URLs: {base}")
    out.print(f"REST API: {base}/api/v1/nni")
    if foreground:
        out.print("Running in the foreground: Ctrl-C stops the experiment.")
    else:
        success(f'To stop experiment run "trialfleet stop {experiment_id}" or "trialfleet stop --all"')


def _ref(experiment_id: str, experiment_dir: Path | None) -> ExperimentRef:
    """The manifest entry; with ``--experiment_dir`` an experiment from elsewhere is added to the manifest."""
    from trialfleet.client import resolve_experiment
    from trialfleet.storage import ExperimentStore, manifest

    if experiment_dir is not None:
        directory = experiment_dir.expanduser().resolve() / experiment_id
        store = ExperimentStore.for_experiment_dir(directory, readonly=True)
        try:
            row = store.experiment()
        finally:
            store.close()
        manifest.upsert(
            row.id,
            experimentDir=str(directory),
            logDir=str(directory),
            status="STOPPED",
            platform=row.config.get("trainingService", {}).get("platform", ""),
            experimentName=row.config.get("experimentName", ""),
        )
    return resolve_experiment(experiment_id)


def resume(
    experiment_id: str = typer.Argument(..., help="the id of a stopped experiment"),
    port: int = PortOption,
    debug: bool = DebugOption,
    foreground: bool = ForegroundOption,
    experiment_dir: Path | None = ExperimentDirOption,
) -> None:
    """Resume a stopped experiment: unfinished trials are re-run and the tuner continues from its history."""
    from trialfleet import startup

    ref = _ref(experiment_id, experiment_dir)
    startup.check_relaunch(ref, "resume", port, host=HOST)
    if foreground:
        from trialfleet.manager.launcher import bind_socket

        _run_foreground(ref.id, ref.experiment_dir, "resume", bind_socket(port, HOST), debug, None)
        return
    launched = startup.spawn(ref.experiment_dir, "resume", port, debug=debug, host=HOST)
    _print_started(launched.experiment_id, launched.url, None)


def view(
    experiment_id: str = typer.Argument(..., help="the id of a stopped experiment"),
    port: int = PortOption,
    experiment_dir: Path | None = ExperimentDirOption,
) -> None:
    """Serve a stopped experiment read-only (web UI and REST API)."""
    from trialfleet import startup

    ref = _ref(experiment_id, experiment_dir)
    startup.check_relaunch(ref, "view", port, host=HOST)
    launched = startup.spawn(ref.experiment_dir, "view", port, host=HOST)
    _print_started(launched.experiment_id, launched.url, None)


def stop(
    experiment_id: str | None = typer.Argument(None, help="id, id prefix or pattern with *"),
    port: int | None = typer.Option(None, "--port", "-p", help="the experiment on this port"),
    every: bool = typer.Option(False, "--all", "-a", help="stop every running experiment"),
) -> None:
    """Stop running experiments: their trials are stopped, then their managers exit."""
    from trialfleet.client import resolve_running
    from trialfleet.errors import TrialfleetError
    from trialfleet.manager.launcher import stop_manager

    refs = resolve_running(experiment_id, every=every, port=port)
    if not refs:
        console().print("There is no experiment running.")
        return
    for ref in refs:
        console().print(f"Stopping experiment {ref.id}")
        if not stop_manager(int(ref.entry["pid"])):
            raise TrialfleetError(
                f"the manager of experiment {ref.id} (pid {ref.entry['pid']}) did not stop in 60 s"
            )
        success("Stop experiment success.")
