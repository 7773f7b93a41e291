"""Which function runs each nnictl command, and nnictl's way of ending one: errors are ``ERROR: ...`` lines on
stdout. Commands whose output scripts do not parse (``top``, ``algo``, ``experiment delete``) are trialfleet's
own, run with the same arguments."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from trialfleet.cli.nnictl import launching, output, reading
from trialfleet.cli.nnictl.parser import build_parser

if TYPE_CHECKING:
    from trialfleet.manager.standby import StandbyManager

NOT_OFFERED = {
    "experiment save": "an experiment is its directory: copy <working directory>/<id> and use "
    "'nnictl view/resume <id> --experiment_dir <working directory>' where it lands",
    "experiment load": "copy the experiment's directory and use 'nnictl view/resume <id> --experiment_dir'",
    "platform clean": "a remote experiment's files are under remoteRoot/<experiment id> on each host: delete it",
    "trainingservice register": "trialfleet's platforms are Python packages with a "
    "'trialfleet.training_services' entry point (see 'trialfleet platforms')",
    "ss_gen": "annotations were removed in NNI 3.0: write the search space",
    "jupyter-extension install": "open the web UI's URL instead",
    "hello": "start from trialfleet's examples/quickstart",
}
NOT_OFFERED["trainingservice unregister"] = NOT_OFFERED["trainingservice list"] = NOT_OFFERED[
    "trainingservice register"
]
NOT_OFFERED["jupyter-extension uninstall"] = NOT_OFFERED["jupyter-extension install"]


Handler = Callable[[argparse.Namespace, "StandbyManager | None"], None]

HANDLERS: dict[str, Handler] = {
    "create": launching.create,
    "resume": launching.resume,
    "view": launching.view,
    "stop": launching.stop,
    "trial ls": reading.trial_ls,
    "trial kill": reading.trial_kill,
    "experiment show": reading.experiment_show,
    "experiment status": reading.experiment_status,
    "experiment list": reading.experiment_list,
    "experiment export": reading.experiment_export,
    "experiment import": reading.experiment_import,
    "update concurrency": reading.update_concurrency,
    "update trialnum": reading.update_trialnum,
    "update duration": reading.update_duration,
    "update searchspace": reading.update_searchspace,
    "log stdout": reading.log_stdout,
    "log stderr": reading.log_stderr,
    "log trial": reading.log_trial,
    "config show": reading.config_show,
    "webui url": reading.webui_url,
}

#: run as ``trialfleet <same arguments>``
TRIALFLEET_S = {"top", "algo register", "algo unregister", "algo show", "algo list", "experiment delete"}


def dispatch(args: list[str], standby: StandbyManager | None) -> int:
    from trialfleet.errors import TrialfleetError

    namespace = build_parser().parse_args(args)
    try:
        return _run(namespace, args, standby)
    except TrialfleetError as exc:
        output.error(str(exc).rstrip())
        return exc.exit_code
    except BrokenPipeError:  # the reader (| head) has gone: nothing more to say to it
        import os
        import sys

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ValueError, OSError) as exc:
        output.error(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130


def _run(namespace: argparse.Namespace, args: list[str], standby: StandbyManager | None) -> int:
    command = namespace.command
    if namespace.version and command is None:
        from trialfleet import __version__

        print(__version__)
    elif command is None:
        print('Please run "nnictl {positional argument} --help" to see nnictl guidance.')
    elif command == "package":
        output.error(
            "nnictl package command is replaced by nnictl algo, please run nnictl algo -h to show the usage"
        )
    elif command in NOT_OFFERED:
        output.error(f"'nnictl {command}' is not offered by trialfleet: {NOT_OFFERED[command]}")
        return 1
    elif command in TRIALFLEET_S:
        from trialfleet.cli.main import main as trialfleet

        return trialfleet(_unaliased(args))
    else:
        HANDLERS[command](namespace, standby)
    return 0


def _unaliased(args: list[str]) -> list[str]:
    """nnictl's ``algo reg``/``unreg`` under trialfleet's names."""
    names = {"reg": "register", "unreg": "unregister"}
    return [names.get(a, a) if i == 1 and args[0] == "algo" else a for i, a in enumerate(args)]
