"""A trial over its Slurm time limit ends EARLY_STOPPED with failure kind TIMEOUT.

Slurm sends the job SIGTERM at the limit, so the keeper records a cancel; Slurm's TIMEOUT state says why. The
trial was submitted at the start of the session (conftest.over_time_limit) by a service since closed, and is
re-adopted here from its handle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slurm_helpers import OverTimeLimit

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.slurm import SlurmTrainingService

pytestmark = pytest.mark.slurm

GUARD = 240.0  # a minute of limit, up to a minute more before slurmctld looks, plus a loaded CI machine


async def test_a_trial_over_its_time_limit_is_early_stopped(over_time_limit: OverTimeLimit) -> None:
    service = SlurmTrainingService(over_time_limit.context)
    await service.start()
    try:
        await service.adopt("overtime", over_time_limit.handle, {})
        seen = await poll_until(service, lambda seen: "overtime" in seen.ended, guard=GUARD)
    finally:
        await service.close()
    ended = seen.ended["overtime"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT)
    assert ended.message is not None and "TIMEOUT" in ended.message and "time limit" in ended.message
    trial_dir = Path(over_time_limit.handle["trial_dir"])
    assert json.loads((trial_dir / "result.json").read_text())["canceled"] is True  # Slurm's SIGTERM
    assert "DUE TO TIME LIMIT" in (trial_dir / "slurm.out").read_text()
