"""The floor of the remote gap in bench/RESULTS.md: the same trials, each in an SSH session of its own under
trialfleet's keeper and nothing else, on the fleet the remote workload uses."""

from __future__ import annotations

import math

import pytest
from fleet import Fleet

from bench.launch import LaunchSpec
from bench.remote import bare_ssh_run

pytestmark = pytest.mark.ssh


def test_the_floor_runs_every_trial_under_its_keeper(fleet: Fleet) -> None:
    machines = [host.machine() for host in fleet.hosts]
    run = bare_ssh_run(machines, LaunchSpec("nni", trials=7, concurrency=3))
    assert run["trials"] == 7  # every trial's keeper recorded exit code 0
    # a slot is freed by an end before it starts again: no gap is negative, and there are 7 - 3 of them
    assert math.isfinite(run["gap_median_s"]) and run["gap_median_s"] >= 0
    # counted from the keeper's start of the command, the gap holds the session and the keeper's start too
    assert run["gap_median_s"] > run["gap_from_request_median_s"] >= 0
