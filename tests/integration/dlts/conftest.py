"""Fixtures for the DLTS platform tests: a DLTS dashboard emulator whose NFS export is in the test's temp
directory; this machine mounts the user's work path (what jobs see at ``/work``) at ``dlts.work_dir()``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulators.dlts import DltsEmulator


@pytest.fixture
def dlts(tmp_path: Path) -> Iterator[DltsEmulator]:
    """Jobs move on by themselves, as on a real cluster (not only once a client read their state: the contract
    suite waits for a trial's first step before it polls)."""
    with DltsEmulator(tmp_path / "nfs", kill_grace=0.2, wait_for_poll=False) as emulator:
        yield emulator
