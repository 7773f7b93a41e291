"""How a trial's command is started: ``bash -c <trialCommand>``, as NNI starts it, unless bash would only split
the command into words and exec the program the first one names.

A command such as ``python3 mnist.py --lr 0.01`` holds nothing bash interprets: no quote, variable, glob, tilde,
redirection, pipe, list, group or comment, and its program is neither a bash builtin nor keyword. bash would find
that program on ``PATH``, and exec it, in place of itself, with the words as its argv, and with the variables of
leading assignments (``CUDA_VISIBLE_DEVICES=0 python3 mnist.py``) in its environment. For such a command the
keeper execs those words itself, sparing the trial a bash start (about 1 ms, and 2 ms of per-trial overhead in
``python -m bench``); the environment is made as bash 5 leaves it for its command (the assignments, ``PWD``,
``SHLVL``, ``_``). Anything else, or any doubt (a program not found, not executable, a script
without ``#!`` that bash would run as a bash script, ``BASH_ENV`` set, a relative ``PATH`` entry), runs under
``bash -c`` unchanged, so errors read as bash's.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

BASH = "/bin/bash"

#: characters that mean something to bash (word separators aside): a command with one of them goes to bash
_SHELL_SYNTAX = frozenset("|&;<>()$`\\\"'*?[]#~{}!\n\r\v\f")
#: bash's reserved words and builtins: bash itself runs those
_BASH_WORDS_TEXT = """! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while
    . : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo
    enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd
    printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true type
    typeset ulimit umask unalias unset wait"""
_BASH_WORDS = frozenset(_BASH_WORDS_TEXT.split())
_BLANKS = re.compile(r"[ \t]+")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
#: variables bash gives a meaning of its own (or sets itself) when a command assigns them: such a command goes
#: to bash, as does any name starting with BASH or COMP_
_BASH_VARIABLES_TEXT = """PATH PWD OLDPWD SHLVL _ ENV SHELLOPTS POSIXLY_CORRECT IFS UID EUID PPID GROUPS RANDOM SRANDOM
    SECONDS LINENO HISTCMD FUNCNAME DIRSTACK EPOCHREALTIME EPOCHSECONDS OPTIND OPTERR OPTARG HOSTNAME HOSTTYPE
    MACHTYPE OSTYPE COLUMNS LINES CDPATH GLOBIGNORE FIGNORE MAIL MAILPATH MAILCHECK PS1 PS2 PS3 PS4 TMOUT"""
_BASH_VARIABLES = frozenset(_BASH_VARIABLES_TEXT.split())


def trial_argv(command: str, cwd: str, env: dict[str, str]) -> list[str]:
    """The argv that runs ``command`` in ``cwd`` with the trial's whole environment ``env``; when that is the
    command's own words, ``env`` gets the variables bash would have set for it."""
    found = _program(command, cwd, env)
    if found is None:
        return [BASH, "-c", command]
    assignments, words, program = found
    env.update(assignments)
    env["PWD"] = cwd
    env.setdefault("SHLVL", "0")  # bash counts itself in, and out again as it execs its last command
    env["_"] = program if "/" not in words[0] else words[0]
    return words


def _program(command: str, cwd: str, env: Mapping[str, str]) -> tuple[dict[str, str], list[str], str] | None:
    """The command's leading assignments, its words and the program bash would exec for them; None when bash
    has more to do."""
    if env.get("BASH_ENV") or any(char in _SHELL_SYNTAX for char in command):
        return None
    words = _BLANKS.split(command.strip(" \t"))
    assignments: dict[str, str] = {}
    while words and (assignment := _ASSIGNMENT.fullmatch(words[0])):
        name, value = assignment.groups()
        if name in _BASH_VARIABLES or name.startswith(("BASH", "COMP_")):
            return None
        assignments[name] = value
        del words[0]
    first = words[0] if words else ""
    if not first or first in _BASH_WORDS or "=" in first:
        return None
    program = os.path.join(cwd, first) if "/" in first else _on_path(first, env.get("PATH", os.defpath))
    if program is None or not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return None
    try:
        with open(program, "rb") as f:
            magic = f.read(4)
    except OSError:
        return None
    if not (magic.startswith(b"#!") or magic == b"\x7fELF"):
        return None  # bash would run it as a bash script of its own
    return assignments, words, program


def _on_path(name: str, path: str) -> str | None:
    """The first executable file ``name`` on ``path``, as bash finds it; None when not found or when ``path`` has
    a relative entry (resolved against the trial's directory, not this process's)."""
    if any(not os.path.isabs(entry) for entry in path.split(os.pathsep)):
        return None
    return shutil.which(name, path=path)
