"""Fixtures: an emulated OpenPAI cluster per test, its default storage in the test's directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.emulators.openpai import ClusterConfig, OpenPAIEmulator, Timing

# short states keep a job around a quarter of a second; tests that must see each state hold them instead
FAST = {
    "AttemptCreationPending": 0.02,
    "AttemptCreationRequested": 0.01,
    "AttemptPreparing": 0.01,
    "AttemptRunning": 0.01,
    "AttemptDeletionPending": 0.01,
    "AttemptDeletionRequested": 0.01,
    "AttemptDeleting": 0.01,
    "AttemptCompleted": 0.01,
}


@pytest.fixture
def pai(tmp_path: Path) -> Iterator[OpenPAIEmulator]:
    config = ClusterConfig(timing=Timing(delays=dict(FAST), stop_grace=1.0))
    with OpenPAIEmulator(config, storage_dir=tmp_path / "nfs", workdir=tmp_path / "cluster") as emulator:
        yield emulator


@pytest.fixture
def client(pai: OpenPAIEmulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=pai.api, headers=pai.auth_headers("alice"), timeout=30) as http:
        yield http
