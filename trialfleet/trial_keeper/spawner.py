#!/usr/bin/env python3
"""trialfleet keeper spawner: starts trial keepers by forking itself, so that no trial waits for its keeper's
interpreter to start.

Usage: ``python3 -I -S spawner.py <trials directory>``, one trial directory below it per line on stdin; answers
each with the pid of the keeper it started (``keeper.fork_keeper``), or ``error: <why>``, one line on stdout. It
exits at EOF: the keepers it started run on, needing nothing of this process. They and their trials stay in its
session (each in a process group of its own), so Linux's autogroup scheduler weighs an experiment's trials as one
against its manager, which has a session of its own.
A forked keeper keeps this command line, so ``ps`` shows it with its experiment's trials directory. Standalone and
stdlib-only, like ``keeper.py`` beside it.
"""

from __future__ import annotations

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out

import keeper

# imported once here, not by every keeper it forks (become_subreaper): 1-2 ms each
with contextlib.suppress(ImportError):
    import ctypes  # noqa: F401

REAP_INTERVAL = 0.5  # ended keepers are zombies (dead to every reader: see keeper.process_alive) until reaped


def answer(trials_dir: str, trial_dir: str) -> bytes:
    if os.path.dirname(os.path.normpath(trial_dir)) != trials_dir:
        return f"error: {trial_dir} is not a directory of {trials_dir}\n".encode()
    try:
        return f"{keeper.fork_keeper(trial_dir)}\n".encode()
    except OSError as exc:
        return ("error: " + str(exc).replace("\n", " ") + "\n").encode()


def main(argv: list) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: spawner.py <trials directory>\n")
        return 2
    trials_dir = os.path.normpath(argv[1])
    requests = keeper.LineReader(0)
    while True:
        lines = requests.lines(REAP_INTERVAL)
        keeper.reap_exited_children()
        if lines is None:
            return 0
        for line in lines:  # answered unbuffered: a fork copies no pending output
            os.write(1, answer(trials_dir, os.fsdecode(line)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
