"""The test cluster itself: daemons that cannot start fail with their logs (a test is never skipped)."""

from __future__ import annotations

from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slurm


def test_daemons_that_cannot_start_fail_with_their_logs(tmp_path: Path) -> None:
    cluster = SlurmCluster(tmp_path / "has a space")  # slurm.conf cannot name such paths unquoted
    try:
        with pytest.raises(RuntimeError) as failure:
            cluster.start()
    finally:
        cluster.stop()
    message = str(failure.value)
    assert "exited while waiting" in message and "----- slurmd.out -----" in message
    assert "Parse error" in message
    assert cluster.processes == {}
