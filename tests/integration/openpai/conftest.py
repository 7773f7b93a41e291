"""Fixtures for the OpenPAI platform tests: an emulated OpenPAI cluster per test (tests/emulators/openpai), its
default storage ``confignfs`` in the test's directory, which is the storage's mount point on the manager's machine
too (``localStorageMountPoint``); the job's containers see it at ``/mnt/confignfs``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openpai_helpers import FAST

from tests.emulators.openpai import ClusterConfig, OpenPAIEmulator, Timing


@pytest.fixture
def pai(tmp_path: Path) -> Iterator[OpenPAIEmulator]:
    config = ClusterConfig(timing=Timing(delays=dict(FAST), stop_grace=10.0))
    with OpenPAIEmulator(config, storage_dir=tmp_path / "nfs", workdir=tmp_path / "cluster") as emulator:
        yield emulator
