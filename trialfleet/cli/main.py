"""``trialfleet``: nnictl's commands. Start-up stays fast: each command imports what it needs when it runs."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from trialfleet.cli import algo, experiments, launch, logs, platforms, tensorboard, trials, update, webui
from trialfleet.cli.output import error_block

if TYPE_CHECKING:
    from trialfleet.manager.standby import StandbyManager

app = typer.Typer(
    name="trialfleet",
    help="Run NNI-compatible AutoML experiments (nnictl's commands).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from trialfleet import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", "-v", is_eager=True, callback=_print_version, help="print the version and exit"
    ),
) -> None:
    """Run NNI-compatible AutoML experiments (nnictl's commands)."""


launch.register(app)
app.command("top")(trials.top)
app.command("platforms")(platforms.platforms)
app.add_typer(trials.app, name="trial")
app.add_typer(experiments.app, name="experiment")
app.add_typer(experiments.config_app, name="config")
app.add_typer(update.app, name="update")
app.add_typer(logs.app, name="log")
app.add_typer(algo.app, name="algo")
app.add_typer(webui.app, name="webui")
app.add_typer(tensorboard.app, name="tensorboard")


def build_command() -> Any:
    """The click command of ``app``, with no type shown on flags: typer's help panel labels every flag
    ``<bool>`` though a flag takes no value (``--version -v`` is typed alone)."""
    command = typer.main.get_command(app)
    _hide_flag_types(command)
    return command


def _hide_flag_types(command: Any) -> None:
    # click caches the help option (since 8.1.8), so the one changed here is the one shown
    help_option = command.get_help_option(typer.Context(command))
    for param in [*command.params, help_option]:
        if param is not None and getattr(param, "is_flag", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _hide_flag_types(sub)


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or "-d" in argv or bool(os.environ.get("TRIALFLEET_DEBUG"))


def main(argv: list[str] | None = None, standby: StandbyManager | None = None) -> int:
    """Run one command: a TrialfleetError is one block on stderr and its exit code (no traceback unless
    --debug or TRIALFLEET_DEBUG=1). ``standby``: a manager process the console script started for these
    arguments before this module was imported (:mod:`trialfleet.cli.entry`)."""
    from trialfleet.cli.abbreviations import expand_abbreviations
    from trialfleet.errors import TrialfleetError
    from trialfleet.manager.standby import StandbyManager, standby_wanted

    args = sys.argv[1:] if argv is None else argv
    command = build_command()
    try:
        args = expand_abbreviations(command, args)
        if not standby_wanted(args):
            if standby is not None:
                standby.close()
            standby = None
        elif standby is None:  # its interpreter starts and imports while this one parses the config
            standby = StandbyManager.start()
        result = command.main(args=args, prog_name="trialfleet", standalone_mode=False, obj=standby)
    except TrialfleetError as exc:
        if _debug_requested(args):
            import traceback

            traceback.print_exc()
        error_block(str(exc))
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: typer prints them with the command's help hint
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            error_block(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        error_block("aborted")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if standby is not None:
            standby.close()  # not handed an experiment: killed
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    from trialfleet.process_end import leave

    try:
        code = main()
    finally:
        leave()
    sys.exit(code)
