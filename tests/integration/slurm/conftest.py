"""Fixtures for the Slurm platform tests: one real single-node Slurm for the whole session, a login node in front
of it, and (for the sacct tests) a second cluster with job accounting."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from login_node import LoginFleet, missing_fleet_components, start_login_node
from slurm_cluster import SlurmCluster, running_cluster
from slurm_helpers import HOLD, OverTimeLimit, slurm_context, submitted, trial_spec

from trialfleet.training_services.slurm import SlurmTrainingService


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    """A trial code directory holding hold.py (:data:`slurm_helpers.HOLD`)."""
    path = tmp_path / "code"
    path.mkdir()
    (path / "hold.py").write_text(HOLD)
    return path


@pytest.fixture
def control(tmp_path: Path) -> Path:
    """Where hold.py trials record what they saw and wait for ``release``."""
    path = tmp_path / "control"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running cluster; ``SLURM_CONF`` points at it for this process and everything it starts.

    Finished jobs stay in squeue for an hour (MinJobAge), not Slurm's 5 minutes: the trial over its time limit
    (:func:`over_time_limit`) ends a few minutes into the session and the last test reads its TIMEOUT state from
    squeue, which a session slower than that on a loaded machine (10 min at load 22) had already forgotten."""
    with running_cluster(tmp_path_factory.mktemp("slurm"), "the Slurm tests", min_job_age=3600) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def login_node(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoginFleet]:
    """An sshd host in its own network namespace whose sessions drive the session's cluster."""
    missing = missing_fleet_components()
    if missing:
        pytest.fail(f"the login node tests need {', '.join(missing)} (scripts/system-packages.txt)")
    fleet = start_login_node(tmp_path_factory.mktemp("login"), slurm_cluster)
    try:
        yield fleet
    finally:
        fleet.down()


@pytest.fixture
def login_fleet(login_node: LoginFleet) -> Iterator[LoginFleet]:
    """The login node, every fault a test injected undone afterwards."""
    yield login_node
    login_node.heal()


@pytest.fixture(scope="module")
def accounting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A second cluster, with slurmdbd and MariaDB, that forgets finished jobs after 2 s (MinJobAge)."""
    directory = tmp_path_factory.mktemp("slurm-accounting")
    with running_cluster(directory, "the sacct tests", accounting=True, min_job_age=2) as cluster:
        yield cluster


@pytest.fixture(scope="session", autouse=True)
def over_time_limit(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> OverTimeLimit:
    """Submitted before every other Slurm test, and looked at by the last one (test_slurm_timeout.py).

    Slurm counts time limits in whole minutes and checks them about every 30 s, so this trial takes one to
    two minutes to time out; it does so while the other tests run. The service that submitted it is closed
    without killing it, so the test also re-adopts it from its handle, as a restarted manager would.
    """
    directory = tmp_path_factory.mktemp("time-limit")
    (directory / "code").mkdir()
    (directory / "code" / "sleep.py").write_text("import time\ntime.sleep(600)\n")
    context = slurm_context(directory / "experiment", directory, time_limit=60)

    async def submit() -> dict[str, Any]:
        service = SlurmTrainingService(context)
        await service.start()
        command = f"{shlex.quote(sys.executable)} sleep.py"
        handle = (await submitted(service, trial_spec("overtime", command, directory / "code"))).handle
        await service.close(kill_trials=False)
        return dict(handle)

    return OverTimeLimit(context, asyncio.run(submit()))
