"""nnictl 3.0's command line, as argparse: the same commands, positionals, options, short flags, defaults and
``dest`` names as ``nni/tools/nnictl/nnictl.py``, so argparse's own habits (any unambiguous prefix of a long
option, ``-p8088``, its usage errors and exit code 2) are NNI's too. Each command names its handler by a key
that :mod:`trialfleet.cli.nnictl.commands` maps to a function."""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_PORT = 8080

Spec = tuple[tuple[str, ...], dict[str, Any]]


def _id(required: bool = False) -> Spec:
    return (("id",), {} if required else {"nargs": "?"})


def _opt(*names: str, **kwargs: Any) -> Spec:
    return (names, kwargs)


_PORT = _opt("--port", "-p", default=DEFAULT_PORT, dest="port", type=int)
_DEBUG = _opt("--debug", "-d", action="store_true")
_FOREGROUND = _opt("--foreground", "-f", action="store_true")
_EXPERIMENT_DIR = _opt("--experiment_dir", "-e")
_TRIAL_ID = _opt("--trial_id", "-T", dest="trial_id")
_LOG = [
    _id(),
    _opt("--tail", "-T", dest="tail", type=int),
    _opt("--head", "-H", dest="head", type=int),
    _opt("--path", action="store_true", default=False),
]

#: command (or "group command") → its arguments; the command's words are its handler's key
COMMANDS: dict[str, list[Spec]] = {
    "create": [
        _opt("--config", "-c", required=True, dest="config"),
        _PORT,
        _DEBUG,
        _opt("--url_prefix", "-u", dest="url_prefix"),
        _FOREGROUND,
    ],
    "resume": [_id(True), _PORT, _DEBUG, _FOREGROUND, _EXPERIMENT_DIR],
    "view": [_id(True), _PORT, _EXPERIMENT_DIR],
    "update searchspace": [_id(), _opt("--filename", "-f", required=True)],
    "update concurrency": [_id(), _opt("--value", "-v", required=True)],
    "update duration": [_id(), _opt("--value", "-v", required=True)],
    "update trialnum": [_id(), _opt("--value", "-v", required=True)],
    "stop": [_id(), _opt("--port", "-p", dest="port", type=int), _opt("--all", "-a", action="store_true")],
    "trial ls": [_id(), _opt("--head", type=int), _opt("--tail", type=int)],
    "trial kill": [_id(), _opt("--trial_id", "-T", required=True, dest="trial_id")],
    "experiment show": [_id()],
    "experiment status": [_id()],
    "experiment list": [_opt("--all", action="store_true", default=False)],
    "experiment delete": [_id(), _opt("--all", action="store_true", default=False)],
    "experiment import": [_id(), _opt("--filename", "-f", required=True)],
    "experiment export": [
        _id(),
        _opt("--type", "-t", choices=["json", "csv"], required=True, dest="type"),
        _opt("--filename", "-f", required=True, dest="path"),
        _opt("--intermediate", "-i", action="store_true", default=False),
    ],
    "experiment save": [_id(), _opt("--path", "-p"), _opt("--saveCodeDir", "-s", action="store_true")],
    "experiment load": [
        _opt("--path", "-p", required=True),
        _opt("--codeDir", "-c", required=True),
        _opt("--logDir", "-l"),
        _opt("--searchSpacePath", "-s"),
    ],
    "platform clean": [_opt("--config", "-c", required=True, dest="config")],
    "webui url": [_id()],
    "config show": [_id()],
    "log stdout": _LOG,
    "log stderr": _LOG,
    "log trial": [_id(), _TRIAL_ID],
    "algo register": [_opt("--meta_path", "-m", dest="meta_path", required=True)],
    "algo unregister": [(("name",), {"nargs": 1})],
    "algo show": [(("name",), {"nargs": 1})],
    "algo list": [],
    "trainingservice register": [_opt("--package", dest="package", required=True)],
    "trainingservice unregister": [_opt("--package", dest="package", required=True)],
    "trainingservice list": [],
    "package": [(("args",), {"nargs": argparse.REMAINDER})],
    "top": [_opt("--time", "-t", dest="time", type=int, default=3)],
    "ss_gen": [
        _opt("--trial_command", "-t", required=True, dest="trial_command"),
        _opt("--trial_dir", "-d", default="./", dest="trial_dir"),
        _opt("--file", "-f", default="nni_auto_gen_search_space.json", dest="file"),
    ],
    "jupyter-extension install": [],
    "jupyter-extension uninstall": [],
    "hello": [],
}

_ALIASES = {"algo register": ("reg",), "algo unregister": ("unreg",)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnictl",
        description="nnictl (trialfleet): NNI 3.0's command line for trialfleet experiments",
    )
    parser.add_argument("--version", "-v", action="store_true", help="print the installed version")
    parser.set_defaults(command=None)
    top = parser.add_subparsers()
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for command, arguments in COMMANDS.items():
        words = command.split()
        if len(words) == 1:
            sub = top.add_parser(command)
        else:
            if words[0] not in groups:
                group = top.add_parser(words[0])
                group.set_defaults(command=None)
                groups[words[0]] = group.add_subparsers()
            sub = groups[words[0]].add_parser(words[1], aliases=_ALIASES.get(command, ()))
        for names, kwargs in arguments:
            sub.add_argument(*names, **kwargs)
        sub.set_defaults(command=command)
    return parser
