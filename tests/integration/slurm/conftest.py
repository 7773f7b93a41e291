"""Fixtures for the Slurm platform tests: one real single-node Slurm for the whole session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "contract"))

from slurm_cluster import SlurmCluster, missing_components


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
