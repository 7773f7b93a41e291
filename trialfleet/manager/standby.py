"""A manager process started before its experiment exists, so that ``create`` is not kept waiting for it.

Starting the manager's interpreter and importing what it runs takes about 0.3 s of CPU; ``trialfleet create``
spends as long reading and checking the config and writing the experiment. A standby manager does the first
on another core while the CLI does the second. Told the config file of a ``create``, it imports that config's
platforms meanwhile, with what their start imports (asyncssh for a remote fleet: ~0.2 s), and its built-in
algorithms (Optuna for TPE) until its orders come; otherwise the local platform. ``spawn_manager`` then hands it
its command line and the listening socket over a Unix socket pair, and from there it is the manager
``spawn_manager`` would have started: the same command line (``ps`` shows it), the same logs, the same detached
session.

A standby that is not handed an experiment (the config was refused) is killed when its block ends: it has
opened nothing and written nothing. This module is stdlib-only, and at import it loads only what starting a
standby takes (``subprocess`` and ``socket``: ~10 ms, against ~50 ms with ``json``, ``pathlib`` and the
layout's dataclasses), so the CLI starts one before it imports anything else.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from types import TracebackType

ORDERS_LIMIT = 1 << 16  # bytes: a command line and a few paths

_LAUNCHING = ("create", "resume", "view")
_NOT_DETACHED = ("--foreground", "--help")


def standby_wanted(args: Sequence[str]) -> bool:
    """Whether ``trialfleet`` with these arguments starts a detached manager (``create``, ``resume``, ``view``
    without ``--foreground`` or ``--help``), so its process is worth starting first of all. Long options may
    be written as prefixes (nnictl's habit). A wrong guess costs a process that is killed at once, or a
    manager started the usual way."""
    if not args or args[0] not in _LAUNCHING:
        return False
    for arg in args[1:]:
        if arg == "--":
            break
        name = arg.partition("=")[0]
        if name in ("-f", "-h") or (len(name) > 2 and any(opt.startswith(name) for opt in _NOT_DETACHED)):
            return False
    return True


def config_argument(args: Sequence[str]) -> str | None:
    """The config file of ``trialfleet create`` with these arguments (``--config``/``-c``, or a prefix of the long
    option), if it is there. A wrong guess costs imports the standby manager did not need."""
    if not args or args[0] != "create":
        return None
    for index, arg in enumerate(args[1:], start=1):
        if arg == "--":
            break
        name, equals, value = arg.partition("=")
        if len(name) > 2 and "--config".startswith(name):  # the long option, or a prefix of it
            return value if equals else _following(args, index)
        if arg == "-c":
            return _following(args, index)
        if arg.startswith("-c"):  # -cFILE
            return arg[2:]
    return None


def _following(args: Sequence[str], index: int) -> str | None:
    return args[index + 1] if index + 1 < len(args) else None


class StandbyManager:
    """``with StandbyManager.start() as standby:`` … ``spawn_manager(..., standby=standby)``."""

    def __init__(self, proc: subprocess.Popen[bytes], channel: socket.socket) -> None:
        self.proc = proc
        self._channel = channel
        self.handed = False

    @classmethod
    def start(cls, config_file: str | None = None) -> StandbyManager:
        """``config_file``: the config being created, if known, whose platforms and algorithms the standby imports
        meanwhile."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [sys.executable, "-m", "trialfleet.manager", "--orders-fd", str(theirs.fileno())]
        if config_file is not None:
            argv += ["--preload-for", config_file]
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # until it has its orders: then its experiment's logs
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(proc, ours)

    def hand(self, argv: list[str], sock: socket.socket | None) -> bool:
        """Send the manager its arguments (``manager_command``'s, after the module) and the listening socket;
        False if it is gone (it failed to start: the caller starts a manager the usual way, which says why)."""
        if self.proc.poll() is not None:
            return False
        import json

        orders = json.dumps({"argv": argv}).encode()
        try:
            socket.send_fds(self._channel, [orders], [sock.fileno()] if sock is not None else [])
        except OSError:
            return False
        self.handed = True
        self._channel.close()
        return True

    def close(self) -> None:
        self._channel.close()
        if not self.handed and self.proc.poll() is None:
            self.proc.kill()  # it has opened nothing: there is nothing to end cleanly
            self.proc.wait()

    def __enter__(self) -> StandbyManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def await_orders(fd: int) -> list[str] | None:
    """In the standby manager: wait for its arguments and take up its place. Returns the arguments (with
    ``--socket-fd`` for a socket that came with them), or None when the caller went away without sending
    any. The process's stdout and stderr become its experiment's logs, and its title the command line
    ``spawn_manager`` would have run."""
    import json
    import shlex
    from pathlib import Path

    from trialfleet.layout import MANAGER_STDERR_LOG, MANAGER_STDOUT_LOG

    with socket.socket(fileno=fd) as channel:
        try:
            data, fds, _, _ = socket.recv_fds(channel, ORDERS_LIMIT, 1)
        except OSError:
            return None
    if not data:
        return None
    argv = [str(arg) for arg in json.loads(data)["argv"]]
    if fds:
        argv += ["--socket-fd", str(fds[0])]
    log_dir = Path(argv[argv.index("--experiment-dir") + 1]) / "log"
    for target, name in ((1, MANAGER_STDOUT_LOG), (2, MANAGER_STDERR_LOG)):
        log = os.open(log_dir / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, target)
        os.close(log)
    from setproctitle import setproctitle

    setproctitle(shlex.join([sys.executable, "-m", "trialfleet.manager", *argv]))
    return argv
