"""nnictl's argparse habit: a long option may be shortened to any unambiguous prefix (``--meta`` for
``--meta_path``, ``--exp`` for ``--experiment_dir``), on every command. NNI's docs and users' pipelines
rely on it; click does not do it, so the arguments are expanded before click parses them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def expand_abbreviations(command: Any, args: Sequence[str]) -> list[str]:
    """``args`` with each unambiguous prefix of a long option of the command it addresses written out.

    An ambiguous or unknown prefix is left as it is, so click reports it with its own message.
    """
    out: list[str] = []
    current = command  # a click (or typer's) command; groups have ``commands``
    for index, arg in enumerate(args):
        if arg == "--":
            return [*out, *args[index:]]
        subcommands = getattr(current, "commands", None)
        if subcommands is not None and not arg.startswith("-"):
            current = subcommands.get(arg, current)
            out.append(arg)
            continue
        out.append(_expand(current, arg) if arg.startswith("--") else arg)
    return out


def _expand(command: Any, arg: str) -> str:
    name, sep, value = arg.partition("=")
    known = [
        opt for param in command.params for opt in param.opts + param.secondary_opts if opt.startswith("--")
    ]
    if name in known:
        return arg
    matches = {opt for opt in known if opt.startswith(name)}
    return (matches.pop() + sep + value) if len(matches) == 1 else arg
