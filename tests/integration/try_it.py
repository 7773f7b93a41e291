"""A docs page's try-it section, read from the page and run as written: page and test cannot drift.

The section's ```console blocks hold the commands (``$ `` lines) and, under a command, what it prints. The
commands run in order in one bash process, from the directory a test gives (the checkout's root, where the pages
say to run them), so a variable one line exports or a job one line starts in the background is there for the next
line, as in the user's terminal. A command that ends in `` &`` starts a server in the background: the next command
waits until the server printed every line the page shows under it. Any other command must exit 0. The page's
own stop instructions must stop what it started in the background: a job still running after the last command
fails the run. Whatever is left is killed with the shell's whole session.

The pages name fixed ports (``create``'s 8080, an emulator's): unless told otherwise the terminal has a network
namespace of its own (root: ``unshare --net``, its loopback up), so nothing else on the machine holds them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: the checkout's root, where the pages say to run their commands
ROOT = Path(__file__).resolve().parents[2]
#: stands for what the page elides or leaves to the reader in a line it shows (``eyJhbGciOi…``, ``<id>``)
_ELIDED = re.compile(r"…|<[^<>\s]+>")


#: how long what the page started in the background may take to end once the page stopped it
STOP_GRACE = 30.0
_SHELL = ["bash", "--noprofile", "--norc"]
_PRIVATE_NETWORK = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


@dataclass(frozen=True)
class Step:
    command: str
    shown: tuple[str, ...]  # the lines the page shows under the command

    @property
    def background(self) -> bool:
        return self.command.rstrip().endswith("&")


def try_it_steps(page: Path, heading: str) -> list[Step]:
    """The commands of the ```console blocks of the page's section ``heading``, with what each shows."""
    text = page.read_text()
    assert f"\n{heading}\n" in text, f"{page} has no section {heading!r}"
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    steps: list[Step] = []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:], ()))
            elif steps:
                steps[-1] = Step(steps[-1].command, (*steps[-1].shown, line))
    return steps


def try_it_commands(page: Path, heading: str = "## Try it") -> list[str]:
    """The ``$ `` lines of the ```console blocks of the page's section ``heading``."""
    return [step.command for step in try_it_steps(page, heading)]


def shows(shown: str, printed: str) -> bool:
    """Whether ``printed`` holds the line the page shows, what the page elides standing for anything."""
    pattern = ".*?".join(re.escape(part) for part in _ELIDED.split(shown.strip()))
    return re.search(pattern, printed) is not None


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a user's shell would have it: ``home`` as ``HOME`` (where the pages' ``~``
    paths and ``~/trialfleet-experiments`` land), trialfleet's state below it, and this Python's commands first on
    ``PATH`` (``python``, ``trialfleet``)."""
    return {
        **os.environ,
        "HOME": str(home),
        "TRIALFLEET_HOME": str(home / ".trialfleet"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }


class Terminal:
    """One bash process in a session of its own, fed command after command; its output goes to ``transcript``."""

    def __init__(
        self,
        cwd: Path,
        env: dict[str, str],
        transcript: Path,
        private_network: bool = True,
        niceness: int | None = None,
    ) -> None:
        self.transcript = transcript
        self.status_dir = transcript.parent / f"{transcript.name}.status"
        self.status_dir.mkdir()
        self._count = 0
        with transcript.open("wb") as out:
            self.shell = subprocess.Popen(
                _PRIVATE_NETWORK + _SHELL if private_network else _SHELL,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=None if niceness is None else lambda: os.setpriority(os.PRIO_PROCESS, 0, niceness),
            )

    def output(self, since: int = 0) -> str:
        return self.transcript.read_bytes()[since:].decode(errors="replace")

    def send(self, line: str) -> None:
        assert self.shell.stdin is not None
        self.shell.stdin.write(f"{line}\n".encode())
        self.shell.stdin.flush()

    def run(self, step: Step, timeout: float) -> str:
        """Runs the step as the page shows it; what it printed (a server: until it printed what the page shows)."""
        start = self.transcript.stat().st_size
        self._count += 1
        status = self.status_dir / str(self._count)
        result = "$!" if step.background else "$?"  # a server: its pid
        self.send(f"{{ {step.command}\n}} </dev/null; echo {result} > {status}")
        deadline = time.monotonic() + timeout
        while not self._finished(step, status, start):
            assert self.shell.poll() is None, f"the shell ended at {step.command!r}:\n{self.output()}"
            assert time.monotonic() < deadline, (
                f"{step.command!r} still runs after {timeout} s:\n{self.output()}"
            )
            time.sleep(0.1)
        printed = self.output(start)
        if not step.background:
            code = status.read_text().strip()
            assert code == "0", f"{step.command!r} exited {code}:\n{printed}"
        return printed

    def _finished(self, step: Step, status: Path, start: int) -> bool:
        if not step.background:
            return status.exists() and status.read_text().endswith("\n")
        assert step.shown, f"the page shows nothing under {step.command!r}: nothing tells it is ready"
        printed = self.output(start)
        if all(shows(line, printed) for line in step.shown if line.strip()):
            return True
        if status.exists() and status.read_text().endswith("\n"):
            pid = status.read_text().strip()
            assert Path(f"/proc/{pid}").exists(), f"{step.command!r} ended before it was ready:\n{printed}"
        return False

    def jobs(self) -> str:
        """The shell's background jobs still running (``jobs -r``)."""
        marker = self.status_dir / "jobs"
        marker.unlink(missing_ok=True)
        self.send(f"jobs -r > {marker}.tmp; mv {marker}.tmp {marker}")
        while not marker.exists():
            assert self.shell.poll() is None, self.output()
            time.sleep(0.05)
        return marker.read_text()

    def close(self) -> None:
        for signo in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.shell.pid, signo)
            except ProcessLookupError:
                break
            try:
                self.shell.wait(timeout=15)
                time.sleep(0.5)  # the session's other processes get their signal's time too
            except subprocess.TimeoutExpired:
                continue


def run_as_written(
    steps: list[Step],
    cwd: Path,
    env: dict[str, str],
    transcript: Path,
    timeout: float = 600,
    private_network: bool = True,
    machine: Sequence[str] = (),
    niceness: int | None = None,
    stop_grace: float = STOP_GRACE,
) -> list[str]:
    """Runs the steps in one terminal; what each printed. Fails at the first step that does not run as the page
    says, or when a background job outlives the last step. ``machine``: commands run first, in the same terminal,
    that give it what the page expects of the machine (a daemon running, say); they must exit 0. ``niceness``: the
    terminal's priority (root may raise it: what the page starts then runs ahead of the machine's other work)."""
    terminal = Terminal(cwd, env, transcript, private_network, niceness)
    try:
        for command in machine:
            terminal.run(Step(command, ()), timeout)
        printed = [terminal.run(step, timeout) for step in steps]
        if any(step.background for step in steps):
            deadline = time.monotonic() + stop_grace
            while (left := terminal.jobs()) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert not left, f"the page's commands left these running:\n{left}\n{terminal.output()}"
        return printed
    finally:
        terminal.close()


@contextlib.contextmanager
def local_sshd(home: Path, state: Path) -> Iterator[str]:
    """The command that starts a machine's sshd in the terminal (on 127.0.0.1:22 of its network), for pages that
    expect one: its keys from ``home``'s authorized_keys, ``home`` mounted at root's home (so the page's user is
    root, at home in the test's directory); the sshd is stopped on leaving."""
    state.mkdir()
    key = state / "host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = state / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"HostKey {key}",
                f"PidFile {state / 'sshd.pid'}",
                f"AuthorizedKeysFile {home / '.ssh' / 'authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "Subsystem sftp internal-sftp",
                "",
            ]
        )
    )
    script = 'mount --bind "$1" /root && exec /usr/sbin/sshd -f "$2" -E "$3"'
    try:
        yield shlex.join(
            ["unshare", "--mount", "sh", "-c", script, "sh", str(home), str(config), str(state / "log")]
        )
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((state / "sshd.pid").read_text()), signal.SIGTERM)


def run_with_local_sshd(steps: list[Step], tmp_path: Path) -> tuple[list[str], Path]:
    """Runs the steps as written on a machine whose sshd lets its users in with their keys (:func:`local_sshd`);
    what each printed, and the user's home."""
    home = tmp_path / "home"
    home.mkdir()
    with local_sshd(home, tmp_path / "sshd") as sshd:
        printed = run_as_written(steps, ROOT, user_env(home), tmp_path / "terminal.log", machine=[sshd])
    return printed, home
