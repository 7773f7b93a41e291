"""What a trialfleet process (a CLI command, a manager) does once its work is done and it is about to exit."""

from __future__ import annotations

import gc


def leave() -> None:
    """Hide what is left in memory from the garbage collector, so that the interpreter's last collections at exit do
    not walk it all: every module's objects (pydantic's models most of all), which took 0.28 s of a manager's exit
    with its web server and asyncssh loaded and 70-90 ms of a CLI command's; ``trialfleet stop`` waited for both.
    The memory goes back with the process. Reference counting still frees what it frees at exit (files are closed,
    buffers flushed) and the atexit handlers still run (logging's flush); only the finalizers of objects caught in
    reference cycles are not run, and nothing of trialfleet's waits for those: stores, logs and links are closed
    explicitly before."""
    gc.freeze()
