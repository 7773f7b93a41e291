"""Fixtures for the remote platform tests: a session-wide fleet of 3 sshd hosts in network namespaces."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))

from fleet import Fleet, Host, missing_components
from training_service_contract import make_context

from trialfleet.config import RemoteMachineConfig
from trialfleet.training_services.base import ExperimentContext

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


def machines(hosts: list[Host], **overrides: Any) -> list[RemoteMachineConfig]:
    return [RemoteMachineConfig.model_validate(host.machine(**overrides)) for host in hosts]


def remote_context(
    experiment_dir: Path, hosts: list[Host], *, grace: int = 60, **options: Any
) -> ExperimentContext:
    """A context for RemoteTrainingService with a fresh experiment id (so remote roots never collide)."""
    options.setdefault("machine_list", machines(hosts))
    options.setdefault("allow_partial_fleet", False)
    experiment_id = f"t{uuid.uuid4().hex[:10]}"
    return make_context(experiment_dir, experiment_id, unreachable_grace_period=grace, **options)
