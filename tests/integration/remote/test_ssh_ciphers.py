"""The cipher a host connection negotiates: AES-GCM first (cheaper per packet in asyncssh than ChaCha20-Poly1305),
unless the user's ~/.ssh/config chooses the ciphers, which then stays in force."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet import Fleet
from remote_helpers import machines

from trialfleet.training_services.ssh import SshHost, SshTarget

pytestmark = pytest.mark.ssh


async def negotiated(fleet: Fleet) -> str | None:
    host = SshHost(SshTarget.from_machine(machines(fleet.hosts)[0]))
    await host.connect()
    try:
        return host.cipher
    finally:
        await host.close()


def home_with_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None) -> None:
    """HOME (where both trialfleet and asyncssh look for ~/.ssh/config) with this config, or none."""
    monkeypatch.setenv("HOME", str(tmp_path))
    if text is not None:
        (tmp_path / ".ssh").mkdir()
        (tmp_path / ".ssh" / "config").write_text(text)


async def test_a_connection_prefers_aes_gcm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: Fleet
) -> None:
    home_with_ssh_config(tmp_path, monkeypatch, None)
    assert await negotiated(fleet) == "aes128-gcm@openssh.com"


async def test_ciphers_in_the_users_ssh_config_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: Fleet
) -> None:
    home_with_ssh_config(
        tmp_path, monkeypatch, "Host *\n    Ciphers aes256-ctr,chacha20-poly1305@openssh.com\n"
    )
    assert await negotiated(fleet) == "aes256-ctr"


async def test_a_config_that_includes_another_is_left_to_asyncssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fleet: Fleet
) -> None:
    home_with_ssh_config(tmp_path, monkeypatch, "Include more.conf\n")
    (tmp_path / ".ssh" / "more.conf").write_text("Ciphers=aes192-ctr\n")
    assert await negotiated(fleet) == "aes192-ctr"
