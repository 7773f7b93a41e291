"""docs/remote.md's "Try it", read from the page and run as written from the checkout root, on a machine whose sshd
lets its users in with their keys: an sshd of the test's own on 127.0.0.1:22 of the test's network, with the
user's home (the test's) where root's is, as on the page's machine."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.try_it import run_as_written, try_it_steps

pytestmark = pytest.mark.ssh

ROOT = Path(__file__).resolve().parents[3]


def local_sshd(home: Path, state: Path) -> str:
    """The command that starts the machine's sshd: its keys from ``home``'s authorized_keys, ``home`` mounted at
    root's home (so the page's user is root, at home in the test's directory)."""
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
    return shlex.join(
        ["unshare", "--mount", "sh", "-c", script, "sh", str(home), str(config), str(state / "log")]
    )


def test_the_remote_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "remote.md", "## Try it")
    assert steps[-1].command == "trialfleet create --config examples/remote/config_localhost.yml --foreground"
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "TRIALFLEET_HOME": str(home / ".trialfleet"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    sshd = local_sshd(home, tmp_path / "sshd")
    try:
        printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log", machine=[sshd])
    finally:
        pid_file = tmp_path / "sshd" / "sshd.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    assert "DONE" in printed[-1] and "trials: succeeded 4" in printed[-1], printed[-1]
    assert len(list((home / "trialfleet").glob("*/trials/*"))) == 4
