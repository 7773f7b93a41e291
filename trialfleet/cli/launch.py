"""``create``, ``resume``, ``view`` and ``stop``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from trialfleet.cli.output import console, success, warning, yellow_ruled

if TYPE_CHECKING:
    import socket

    from trialfleet.client import ExperimentRef
    from trialfleet.config import ExperimentConfig
    from trialfleet.config.convert_v1 import V1Conversion
    from trialfleet.manager.launcher import Launched
    from trialfleet.manager.standby import StandbyManager

DEFAULT_PORT = 8080
PORT_RANGE = (1, 65535)  # as trialfleet.manager.launcher's (not imported: the CLI starts fast)
HOST = "127.0.0.1"


def _tcp_port(value: int | None) -> int | None:
    """The option refuses what is not a TCP port itself: 70000 would otherwise wrap around to port 4464."""
    low, high = PORT_RANGE
    if value is not None and not low <= value <= high:
        raise typer.BadParameter(f"{value} is not a TCP port: expected {low} to {high}")
    return value


PortOption = typer.Option(
    DEFAULT_PORT, "--port", "-p", callback=_tcp_port, help="port of the web UI and REST API (1-65535)"
)
DebugOption = typer.Option(False, "--debug", "-d", help="debug logging (and tracebacks on errors)")
ForegroundOption = typer.Option(False, "--foreground", "-f", help="run the manager in this terminal")
UrlPrefixOption = typer.Option(None, "--url_prefix", "-u", help="serve the web UI and API under this path")
HostOption = typer.Option(
    HOST,
    "--host",
    "--listen",
    help="address to listen on; anything but 127.0.0.1/::1/localhost (e.g. 0.0.0.0) requires the "
    "experiment's access token",
)
PublicReadOption = typer.Option(
    False, "--public-read", help="beyond loopback: let anyone read without the token (changes still need it)"
)
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
    ctx: typer.Context,
    config: Path = typer.Option(..., "--config", "-c", help="the experiment config (YAML, v2 or legacy v1)"),
    port: int = PortOption,
    debug: bool = DebugOption,
    foreground: bool = ForegroundOption,
    url_prefix: str | None = UrlPrefixOption,
    host: str = HostOption,
    public_read: bool = PublicReadOption,
) -> None:
    """Create an experiment from a config file and start it."""
    start_created(config, port, debug, foreground, url_prefix, Listening(host, public_read), _standby(ctx))


def start_created(
    config: Path,
    port: int,
    debug: bool,
    foreground: bool,
    url_prefix: str | None,
    listening: Listening,
    standby: StandbyManager | None,
    announce: Announce | None = None,
) -> None:
    """``create``'s work, for any door: ``announce`` prints what the experiment is and where it is served
    (trialfleet's lines by default; ``nnictl`` prints NNI's)."""
    from trialfleet.manager.standby import StandbyManager

    announce = announce or Announce()
    if foreground:
        if standby is not None:
            standby.close()
        _create_in_foreground(_load(config), port, debug, url_prefix, listening, announce)
        return
    # the manager's process starts now (if main() has not started it), on another core, while the config is
    # read and checked
    with standby or StandbyManager.start(str(config)) as standby:
        loaded = _load(config)
        from trialfleet import startup

        with startup.created(loaded, port, host=listening.host) as new:
            token = listening.token_for(new.experiment_dir)
            announce.starting(new.experiment_id, "create")
            launched = startup.spawn(
                new.experiment_dir,
                "create",
                port,
                debug=debug,
                url_prefix=url_prefix,
                host=listening.host,
                public_read=listening.public_read,
                sock=new.sock,
                standby=standby,
            )
    announce.started(launched.experiment_id, launched.url, url_prefix, token, False)
    _refuse_failed_start(launched)


def _standby(ctx: typer.Context) -> StandbyManager | None:
    """The standby manager ``main`` started for this command, if it did (see
    :func:`trialfleet.manager.standby.standby_wanted`)."""
    from trialfleet.manager.standby import StandbyManager

    return ctx.obj if isinstance(ctx.obj, StandbyManager) else None


def _load(config: Path) -> ExperimentConfig:
    """The config, its warnings printed (a legacy v1 file: with its v2 form)."""
    from trialfleet.config import load_config

    def show_converted(conversion: V1Conversion) -> None:
        if conversion.nni_has_v2_form:
            warning("You are using a legacy (v1) config file; this is its v2 form, please update the file:")
        else:
            platforms = ", ".join(conversion.platforms)
            warning(
                f"You are using a legacy (v1) config file; NNI ran {platforms} only from v1 files, and there is no "
                "NNI v2 form to update to. trialfleet reads it as this v2 form (which runs on trialfleet only):"
            )
        yellow_ruled(conversion.shown())

    loaded = load_config(config, on_converted=show_converted)
    for message in loaded.warnings:
        warning(message)
    return loaded.config


def _refuse_failed_start(launched: Launched) -> None:
    """The manager answered, but the experiment is in ERROR (a platform or a tuner that cannot start, a full
    disk): say why and exit 1. The experiment stays, with its error."""
    from trialfleet.errors import TrialfleetError
    from trialfleet.storage.manager_lock import manager_running

    if launched.status != "ERROR":
        return
    reason = "; ".join(launched.errors) or "see its manager.log"
    experiment_id = launched.experiment_id
    if manager_running(launched.experiment_dir):
        after = f'its manager serves the error until "trialfleet stop {experiment_id}"'
    else:
        after = f'its manager has ended; "trialfleet resume {experiment_id}" once the cause is fixed'
    raise TrialfleetError(f"experiment {experiment_id} failed: {reason}\n({after})")


@dataclass(frozen=True)
class Listening:
    """``--host`` and ``--public-read``: beyond loopback the experiment gets an access token."""

    host: str
    public_read: bool

    def token_for(self, experiment_dir: Path) -> Token | None:
        from trialfleet.access import ensure_token, is_loopback, token_path
        from trialfleet.manager.launcher import listen_address

        if is_loopback(listen_address(self.host)):
            return None
        value, created = ensure_token(experiment_dir)
        return Token(value, token_path(experiment_dir), created)


@dataclass(frozen=True)
class Token:
    value: str
    path: Path
    new: bool  # printed once, when it is made; afterwards only its file is named


class Announce:
    """What a door prints while an experiment starts: trialfleet's lines here, NNI's in ``nnictl``."""

    def starting(self, experiment_id: str, action: str) -> None:
        """Before a detached manager is started for ``action`` (create, resume, view)."""
        if action == "create":
            print("Starting the manager...", flush=True)  # rich is imported once the manager has its orders

    def started(
        self, experiment_id: str, url: str, url_prefix: str | None, token: Token | None, foreground: bool
    ) -> None:
        _print_started(experiment_id, url, url_prefix, token, foreground)


def _create_in_foreground(
    config: ExperimentConfig,
    port: int,
    debug: bool,
    url_prefix: str | None,
    listening: Listening,
    announce: Announce,
) -> None:
    from trialfleet import startup
    from trialfleet.manager.launcher import link_latest

    with startup.created(config, port, host=listening.host) as new:
        link_latest(new.experiment_dir)
        _run_foreground(
            new.experiment_id, new.experiment_dir, "create", new.sock, debug, url_prefix, listening, announce
        )


def _run_foreground(
    experiment_id: str,
    experiment_dir: Path,
    action: str,
    sock: socket.socket,
    debug: bool,
    url_prefix: str | None,
    listening: Listening,
    announce: Announce,
) -> None:
    from trialfleet.cli import foreground
    from trialfleet.manager.launcher import connect_url

    token = listening.token_for(experiment_dir)
    url = connect_url(listening.host, sock.getsockname()[1])
    announce.started(experiment_id, url, url_prefix, token, True)
    code = foreground.run(
        experiment_dir, action, sock, debug, public_read=listening.public_read, url_prefix=url_prefix or ""
    )
    raise typer.Exit(code)


def _print_started(
    experiment_id: str, url: str, url_prefix: str | None, token: Token | None, foreground: bool
) -> None:
    from rich.text import Text

    base = f"{url}/{url_prefix.strip('/')}" if url_prefix and url_prefix.strip("/") else url
    out = console()
    out.print(Text.assemble("Experiment ID: ", (experiment_id, "bold")))
    out.print(f"Web portal URLs: {base}")
    out.print(f"REST API: {base}/api/v1/nni")
    if token is not None:
        _print_token(token, base)
    if foreground:
        out.print("Running in the foreground: Ctrl-C stops the experiment.")
    else:
        success(f'To stop experiment run "trialfleet stop {experiment_id}" or "trialfleet stop --all"')


def _print_token(token: Token, base: str) -> None:
    from rich.text import Text

    out = console()
    if token.new:
        out.print(Text.assemble(f"Access token (shown once; kept in {token.path}): ", (token.value, "bold")))
        out.print(f"Open the web UI with it once: {base}/?token={token.value}")
    else:
        out.print(
            f"Requests need the experiment's access token (in {token.path}); the web UI: {base}/?token=<token>"
        )
    warning(
        "The server listens beyond this machine: anyone who can reach it and has the token can control the experiment."
    )


def experiment_ref(experiment_id: str, experiment_dir: Path | None) -> ExperimentRef:
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
    ctx: typer.Context,
    experiment_id: str = typer.Argument(..., help="the id of a stopped experiment"),
    port: int = PortOption,
    debug: bool = DebugOption,
    foreground: bool = ForegroundOption,
    experiment_dir: Path | None = ExperimentDirOption,
    host: str = HostOption,
    public_read: bool = PublicReadOption,
) -> None:
    """Resume a stopped experiment: unfinished trials are re-run and the tuner continues from its history."""
    ref = experiment_ref(experiment_id, experiment_dir)
    if start_resumed(ref, port, debug, foreground, Listening(host, public_read), _standby(ctx)):
        _print_resumed(ref.experiment_dir)


def start_resumed(
    ref: ExperimentRef,
    port: int,
    debug: bool,
    foreground: bool,
    listening: Listening,
    standby: StandbyManager | None,
    announce: Announce | None = None,
) -> bool:
    """``resume``'s work, for any door; False when it ran in the foreground (and has ended)."""
    from trialfleet import startup

    announce = announce or Announce()
    startup.check_relaunch(ref, "resume", port, host=listening.host)
    if foreground:
        if standby is not None:
            standby.close()
        from trialfleet.manager.launcher import bind_socket

        sock = bind_socket(port, listening.host)
        _run_foreground(ref.id, ref.experiment_dir, "resume", sock, debug, None, listening, announce)
        return False
    token = listening.token_for(ref.experiment_dir)
    announce.starting(ref.id, "resume")
    launched = startup.spawn(
        ref.experiment_dir,
        "resume",
        port,
        debug=debug,
        host=listening.host,
        public_read=listening.public_read,
        standby=standby,
    )
    announce.started(launched.experiment_id, launched.url, None, token, False)
    _refuse_failed_start(launched)
    return True


def _print_resumed(experiment_dir: Path) -> None:
    """What the manager did with the unfinished trials (it records that before it answers REST)."""
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    try:
        resumed = store.events(event="EXPERIMENT_RESUMED")
    finally:
        store.close()
    if resumed and resumed[-1].data:
        done = resumed[-1].data
        console().print(
            f"Resumed: {done.get('adopted', 0)} running trial(s) re-adopted, {done.get('rerun', 0)} stopped "
            f"trial(s) re-run, {done.get('queued', 0)} waiting trial(s) queued"
        )


def view(
    ctx: typer.Context,
    experiment_id: str = typer.Argument(..., help="the id of a stopped experiment"),
    port: int = PortOption,
    experiment_dir: Path | None = ExperimentDirOption,
    host: str = HostOption,
    public_read: bool = PublicReadOption,
) -> None:
    """Serve a stopped experiment read-only (web UI and REST API)."""
    start_viewer(
        experiment_ref(experiment_id, experiment_dir), port, Listening(host, public_read), _standby(ctx)
    )


def start_viewer(
    ref: ExperimentRef,
    port: int,
    listening: Listening,
    standby: StandbyManager | None,
    announce: Announce | None = None,
) -> None:
    """``view``'s work, for any door."""
    from trialfleet import startup

    startup.check_relaunch(ref, "view", port, host=listening.host)
    token = listening.token_for(ref.experiment_dir)
    announce = announce or Announce()
    announce.starting(ref.id, "view")
    launched = startup.spawn(
        ref.experiment_dir,
        "view",
        port,
        host=listening.host,
        public_read=listening.public_read,
        standby=standby,
    )
    announce.started(launched.experiment_id, launched.url, None, token, False)


def stop(
    experiment_id: str | None = typer.Argument(None, help="id, id prefix or pattern with *"),
    port: int | None = typer.Option(
        None, "--port", "-p", callback=_tcp_port, help="the experiment on this port"
    ),
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
        if not stop_manager(int(ref.entry["pid"]), ref.experiment_dir):
            raise TrialfleetError(
                f"the manager of experiment {ref.id} (pid {ref.entry['pid']}) did not stop in 60 s"
            )
        success("Stop experiment success.")
