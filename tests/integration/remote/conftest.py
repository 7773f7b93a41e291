"""Fixtures for the remote platform tests: a session-wide fleet of 3 sshd hosts in network namespaces."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))

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
