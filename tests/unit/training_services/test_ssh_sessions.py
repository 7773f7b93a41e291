"""What a host's refusals and untold endings of SSH sessions lead to (the fleet's sshd shows both when many
sessions run at once: tests/integration/remote/test_preparation.py starts 12 launches on one host)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from trialfleet.errors import PlatformError
from trialfleet.training_services import ssh
from trialfleet.training_services.ssh import CommandResult, SshHost, SshTarget
from trialfleet.training_services.ssh_link import PROBE_ASKS, Probe

UNTOLD = CommandResult(255, b"", b"", told=False)


class StandInLink:
    """What a Probe uses of an SshLink: its name and ``run``, answering from a script of results."""

    name = "u@h:22"

    def __init__(self, *results: CommandResult) -> None:
        self.results = list(results)
        self.runs: list[bytes | None] = []

    async def run(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 0) -> CommandResult:
        self.runs.append(stdin)
        return self.results.pop(0)


async def test_a_probe_command_whose_session_ended_untold_is_asked_again() -> None:
    answer = {"keeper_pid": 7, "existing": True}
    link = StandInLink(UNTOLD, CommandResult(0, json.dumps(answer).encode(), b""))
    probe = Probe(link, "/r/probe.py")  # type: ignore[arg-type]
    assert await probe.call("launch", {"trial_dir": "/r/t"}) == answer
    assert link.runs == [b'{"trial_dir": "/r/t"}'] * 2


async def test_a_probe_command_never_told_its_end_fails_saying_so() -> None:
    link = StandInLink(*[UNTOLD] * PROBE_ASKS)
    with pytest.raises(PlatformError, match=r"probe kill failed \(the session ended without an exit status"):
        await Probe(link, "/r/probe.py").call("kill", {})  # type: ignore[arg-type]
    assert len(link.runs) == PROBE_ASKS


def test_a_result_tells_a_signal_or_an_untold_end() -> None:
    assert CommandResult(255, b"", b"gone", signal="KILL").explain() == "killed by SIGKILL: gone"
    assert CommandResult(3, b"", b"").explain() == "exit status 3"
    assert UNTOLD.explain() == "the session ended without an exit status"


def refusing(times: int, code: int) -> tuple[list[int], Any]:
    calls: list[int] = []

    async def open_session() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise asyncssh.ChannelOpenError(code, "open failed")
        return "session"

    return calls, open_session


@pytest.fixture
def host() -> SshHost:
    return SshHost(SshTarget(host="h", port=22, user="u"))


@pytest.mark.parametrize(
    "code",
    [
        asyncssh.OPEN_CONNECT_FAILED,
        asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
        asyncssh.OPEN_RESOURCE_SHORTAGE,
    ],
)
async def test_a_session_the_host_refuses_is_asked_for_again(host: SshHost, code: int) -> None:
    calls, open_session = refusing(3, code)
    assert await host._when_accepted(open_session) == "session"
    assert len(calls) == 4


async def test_other_channel_errors_and_lasting_refusals_are_raised(
    host: SshHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, open_session = refusing(1, asyncssh.OPEN_UNKNOWN_CHANNEL_TYPE)
    with pytest.raises(asyncssh.ChannelOpenError):
        await host._when_accepted(open_session)
    assert len(calls) == 1
    monkeypatch.setattr(ssh, "SESSION_RETRY_FOR", 0.05)
    calls, open_session = refusing(100, asyncssh.OPEN_CONNECT_FAILED)
    with pytest.raises(asyncssh.ChannelOpenError):
        await host._when_accepted(open_session)
    assert 2 <= len(calls) < 10


def test_a_manager_without_the_ssh_client_says_what_to_install() -> None:
    """asyncssh is the `remote` extra: a plain `pip install trialfleet` has none (a fresh interpreter, where
    importing it fails as it does when it is not installed)."""
    script = """
import asyncio, sys
sys.modules["asyncssh"] = None  # what `import asyncssh` finds: ImportError, as when it is not installed
from trialfleet.errors import PlatformError
from trialfleet.training_services.ssh import SshHost, SshTarget
try:
    asyncio.run(SshHost(SshTarget(host="h", port=22, user="u")).connect())
except PlatformError as exc:
    print(exc)
"""
    tree = Path(__file__).resolve().parents[3]  # the clone the tests run from: the extra comes from it
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tree)
    assert done.stdout.strip().startswith("u@h:22: asyncssh, the SSH client, is not installed ("), done.stderr
    assert done.stdout.strip().endswith("): pip install '.[remote]'")


@pytest.mark.parametrize(
    ("config", "chosen_by_user"),
    [
        (None, False),
        ("Host *\n    User me\n# Ciphers aes256-ctr\n", False),
        ("Host *\n    Ciphers aes256-ctr\n", True),
        ("ciphers=aes256-ctr\n", True),
        ("  Include ~/.ssh/config.d/*\n", True),
    ],
)
def test_the_cipher_preference_gives_way_to_the_users_ssh_config(
    tmp_path: Path, config: str | None, chosen_by_user: bool
) -> None:
    path = tmp_path / "config"
    if config is not None:
        path.write_text(config)
    expected = {} if chosen_by_user else {"encryption_algs": ssh.PREFERRED_CIPHERS}
    assert ssh.cipher_options(path) == expected
