"""An SSH link (a login node, a remote host): reconnects in the background spaced by a doubling delay; an
unreachable login node at start.

The node is a real TCP port on this machine where nothing listens (connections are refused at once); the
clock is injected. Slurm driven through a real login node (sshd in a network namespace) is tested in
tests/integration/slurm/test_slurm_login_node.py.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from trialfleet import RemoteMachineConfig, SlurmConfig
from trialfleet.errors import PlatformError
from trialfleet.testing import make_context
from trialfleet.training_services.slurm import SlurmTrainingService
from trialfleet.training_services.ssh import SshLinkError
from trialfleet.training_services.ssh_link import SshLink


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: connections are refused


def nowhere(tmp_path: Path) -> RemoteMachineConfig:
    return RemoteMachineConfig.model_validate(
        {
            "host": "127.0.0.1",
            "port": closed_port(),
            "user": "nobody",
            "password": "unused",
            "knownHosts": str(tmp_path / "known_hosts"),
        }
    )


async def test_reconnects_run_in_the_background_after_a_doubling_delay(tmp_path: Path) -> None:
    clock = Clock()
    node = SshLink(nowhere(tmp_path), role="slurm: login node", clock=clock)
    with pytest.raises(SshLinkError, match=r"unreachable \(not connected\); reconnecting"):
        await node.run(["squeue"])
    assert node.reconnecting is None and node.next_attempt == 100.5
    clock.now = 100.5
    with pytest.raises(SshLinkError, match="reconnecting"):  # at once: the attempt runs in the background
        await node.run(["squeue"])
    first = node.reconnecting
    assert first is not None
    await first
    assert node.problem is not None and "cannot connect" in node.problem  # the port refused it
    assert node.next_attempt == 101.5
    clock.now = 101.0
    with pytest.raises(SshLinkError):
        await node.run(["squeue"])
    assert node.reconnecting is first  # not due yet
    clock.now = 101.5
    with pytest.raises(SshLinkError):
        await node.run(["squeue"])
    assert node.reconnecting is not first
    await node.reconnecting
    assert node.next_attempt == 103.5 and node.down_since == 100.0
    await node.close()


async def test_an_unreachable_login_node_stops_the_start(tmp_path: Path) -> None:
    config = SlurmConfig(
        trial_command="unused", shared_directory=Path("/cluster/shared"), login_node=nowhere(tmp_path)
    )
    service = SlurmTrainingService(make_context(tmp_path / "exp", config, "unitexp"))
    assert service.runner.description.startswith("login node nobody@127.0.0.1:")
    with pytest.raises(PlatformError, match=r"slurm: cannot use the login node: .*cannot connect"):
        await service.start()
    await service.close()
