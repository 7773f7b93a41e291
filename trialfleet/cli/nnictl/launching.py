"""``nnictl create|resume|view|stop``: trialfleet's launch functions (:mod:`trialfleet.cli.launch`), announced
with NNI's lines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trialfleet.cli.launch import Announce
from trialfleet.cli.nnictl import output

if TYPE_CHECKING:
    from trialfleet.cli.launch import Token
    from trialfleet.manager.standby import StandbyManager

REFERENCE = "Reference: https://nni.readthedocs.io/en/stable/reference/nnictl.html"


class NniAnnounce(Announce):
    """What NNI's ``Experiment.start`` and nnictl print while an experiment starts."""

    def starting(self, experiment_id: str, action: str) -> None:
        output.logged(f"Creating experiment, Experiment ID: {experiment_id}")
        output.logged("Starting web server...")

    def started(
        self, experiment_id: str, url: str, url_prefix: str | None, token: Token | None, foreground: bool
    ) -> None:
        if foreground:  # nothing was started in another process first
            self.starting(experiment_id, "create")
        base = f"{url}/{url_prefix.strip('/')}" if url_prefix and url_prefix.strip("/") else url
        output.logged("Setting up...")
        output.logged(f"Web portal URLs: {base}")
        if token is not None:
            output.logged(f"Requests need the experiment's access token, kept in {token.path}")
        if not foreground:
            output.logged(f'To stop experiment run "nnictl stop {experiment_id}" or "nnictl stop --all"')
            output.logged(REFERENCE)


def create(args: argparse.Namespace, standby: StandbyManager | None) -> None:
    from trialfleet.cli.launch import HOST, Listening, start_created
    from trialfleet.errors import ConfigError

    config = Path(args.config)
    if not config.is_file():
        raise ConfigError(f'"{config}" is not a valid file.')
    start_created(
        config,
        args.port,
        args.debug,
        args.foreground,
        args.url_prefix,
        Listening(HOST, False),
        standby,
        NniAnnounce(),
    )


def resume(args: argparse.Namespace, standby: StandbyManager | None) -> None:
    from trialfleet.cli.launch import HOST, Listening, experiment_ref, start_resumed

    ref = experiment_ref(args.id, _directory(args.experiment_dir))
    start_resumed(ref, args.port, args.debug, args.foreground, Listening(HOST, False), standby, NniAnnounce())


def view(args: argparse.Namespace, standby: StandbyManager | None) -> None:
    from trialfleet.cli.launch import HOST, Listening, experiment_ref, start_viewer

    ref = experiment_ref(args.id, _directory(args.experiment_dir))
    start_viewer(ref, args.port, Listening(HOST, False), standby, NniAnnounce())


def _directory(value: str | None) -> Path | None:
    """``--experiment_dir``: the working directory holding the experiment's folder (NNI's and trialfleet's)."""
    return None if value is None else Path(value)


def stop(args: argparse.Namespace, standby: StandbyManager | None) -> None:
    from trialfleet.client import resolve_running
    from trialfleet.errors import TrialfleetError
    from trialfleet.manager.launcher import stop_manager

    if args.id == "all":
        output.warning(
            "'nnictl stop all' is abolished, please use 'nnictl stop --all' to stop all of experiments!"
        )
        raise SystemExit(1)
    refs = resolve_running(args.id, every=args.all, port=args.port)
    if not refs:
        output.error("There is no experiment running...")
        return
    for ref in refs:
        output.info(f"Stopping experiment {ref.id}")
        if not stop_manager(int(ref.entry["pid"]), ref.experiment_dir):
            raise TrialfleetError(
                f"the manager of experiment {ref.id} (pid {ref.entry['pid']}) did not stop in 60 s"
            )
        output.info("Stop experiment success.")
