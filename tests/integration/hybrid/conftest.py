"""Fixtures for hybrid experiments: one sshd host in a network namespace (tests/integration/remote) and a real
single-node Slurm (tests/integration/slurm), both for the whole session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1]
for _fixtures in ("remote", "slurm"):
    if str(_INTEGRATION / _fixtures) not in sys.path:
        sys.path.insert(0, str(_INTEGRATION / _fixtures))

from fleet import Fleet  # noqa: E402
from fleet import missing_components as missing_fleet_components  # noqa: E402
from slurm_cluster import SlurmCluster, running_cluster  # noqa: E402


@pytest.fixture(scope="session")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    missing = missing_fleet_components()
    if missing:
        pytest.fail(f"the hybrid tests need {', '.join(missing)} (scripts/system-packages.txt)")
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), 1)
    try:
        fleet.up()
        yield fleet
    finally:
        fleet.down()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running cluster; ``SLURM_CONF`` points at it for this process and every manager it starts."""
    with running_cluster(tmp_path_factory.mktemp("slurm"), "the hybrid tests") as cluster:
        yield cluster


@pytest.fixture
def healed_ssh_host(ssh_host: Fleet) -> Iterator[Fleet]:
    """The SSH host, every fault a test injected undone afterwards."""
    yield ssh_host
    ssh_host.heal()
