"""Fixtures for the Slurm platform tests: one real single-node Slurm for the whole session."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))

from slurm_cluster import SlurmCluster, missing_components
from slurm_helpers import OverTimeLimit, slurm_context, submitted, trial_spec

from trialfleet.training_services.slurm import SlurmTrainingService


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The running cluster; ``SLURM_CONF`` points at it for this process and everything it starts."""
    missing = missing_components()
    if missing:
        pytest.fail(f"the Slurm tests need {', '.join(missing)} (scripts/system-packages.txt)")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        try:
            cluster.start()
        except RuntimeError as exc:
            pytest.fail(f"the Slurm daemons did not start: {exc}")
        yield cluster
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


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
