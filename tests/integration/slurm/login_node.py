"""A login node for the Slurm tests: one sshd host of the remote tests' fleet (tests/integration/remote/fleet.py).

The host is a network namespace with its own sshd; it shares this machine's file system and process table, so
the shared directory has the same path there and the jobs it submits run on the test cluster's slurmd. Only
the network differs: from inside the namespace the controller is reached at the bridge's address, not at
127.0.0.1, so the login node has a slurm.conf of its own naming that address (as a real login node names the
controller's), and sshd gives every session ``SLURM_CONF`` pointing at it (``SetEnv`` in a ``Match all``
block: sshd takes the first ``SetEnv`` line only, and the fleet's own comes first). The runner passes no
environment of its own: Slurm's commands find their configuration as on a real login node.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from slurm_cluster import SlurmCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "remote"))

from fleet import Fleet, Host
from fleet import missing_components as missing_fleet_components

from trialfleet import RemoteMachineConfig


class LoginFleet(Fleet):
    """One host, named apart from the remote tests' fleet, which the same pytest run may have up as well."""

    def __init__(self, base: Path) -> None:
        super().__init__(base, 1)
        tag = os.getpid() % 100000
        self.bridge, self.subnet = f"tfl{tag}b", f"10.214.{tag % 200 + 20}"
        host = self.hosts[0]
        host.netns, host.veth, host.address = f"tfl{tag}n", f"tfl{tag}v", f"{self.subnet}.2"

    @property
    def host(self) -> Host:
        return self.hosts[0]

    @property
    def controller_address(self) -> str:
        """This machine as the login node reaches it: the bridge's address."""
        return f"{self.subnet}.1"

    def machine(self) -> RemoteMachineConfig:
        """The host as ``loginNode``."""
        return RemoteMachineConfig.model_validate(self.host.machine())


def start_login_node(base: Path, cluster: SlurmCluster) -> LoginFleet:
    fleet = LoginFleet(base)
    conf = cluster.client_conf(base / "slurm-client", fleet.controller_address)
    fleet.host.extra_sshd_options = ["Match all", f"    SetEnv SLURM_CONF={conf}"]
    try:
        fleet.up()
    except BaseException:
        fleet.down()
        raise
    return fleet


__all__ = ["LoginFleet", "missing_fleet_components", "start_login_node"]
