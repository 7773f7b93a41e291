"""What refuses a remote fleet before an experiment is made: checks of this machine only, no SSH.

A host left as the example's placeholder (a documentation address, RFC 5737 / 3849, or a reserved name,
RFC 2606) or a key file that is not here cannot be used; ``create`` refuses such a fleet by the rule the
service's own start applies (every host usable, or some with ``allowPartialFleet``) instead of making an
experiment that ends in ERROR. Hosts that pass are still checked over SSH when the experiment starts.
"""

from __future__ import annotations

import ipaddress

from trialfleet.training_services.remote.config import RemoteConfig, RemoteMachineConfig
from trialfleet.training_services.ssh import SshTarget

_DOCUMENTATION_NETWORKS = [
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
]
_RESERVED_NAMES = ("example.com", "example.net", "example.org", "example", "invalid")


def fleet_refusals(config: RemoteConfig) -> list[str]:
    """The lines of the refusal, empty when the fleet may start."""
    problems = [(SshTarget.from_machine(m).name, _problem(m)) for m in config.machine_list]
    failed = [(name, why) for name, why in problems if why]
    if not failed or (config.allow_partial_fleet and len(failed) < len(problems)):
        return []
    return [
        f"remote: {len(failed)} of {len(problems)} machine(s) cannot be used (edit machineList):",
        *(f"  - {name}: {why}" for name, why in failed),
    ]


def _problem(machine: RemoteMachineConfig) -> str | None:
    host = machine.host.strip("[]").lower().rstrip(".")
    try:
        if any(ipaddress.ip_address(host) in network for network in _DOCUMENTATION_NETWORKS):
            return f"{machine.host} is a documentation address (RFC 5737), not a host"
    except ValueError:
        if any(host == name or host.endswith(f".{name}") for name in _RESERVED_NAMES):
            return f"{machine.host} is a reserved example name (RFC 2606), not a host"
    key = SshTarget.from_machine(machine).key_file
    if key is not None and not key.expanduser().is_file():
        return f"SSH key file {key.expanduser()} does not exist"
    return None
