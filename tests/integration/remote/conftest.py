"""Fixtures for the remote platform tests: a session-wide fleet of 3 sshd hosts in network namespaces."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleet import Fleet, missing_components

HOSTS = 3


@pytest.fixture(scope="session")
def fleet_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    missing = missing_components()
    if missing:
        pytest.fail(f"the remote tests need {', '.join(missing)} (scripts/system-packages.txt)")
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), HOSTS)
    try:
        fleet.up()
        yield fleet
    finally:
        fleet.down()


@pytest.fixture
def fleet(fleet_session: Fleet) -> Iterator[Fleet]:
    """The fleet, every fault a test injected undone afterwards."""
    yield fleet_session
    fleet_session.heal()
