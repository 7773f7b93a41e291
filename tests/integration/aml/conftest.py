"""Fixtures for the Azure ML platform tests: an Azure ML emulator (HTTPS on loopback, its own Entra ID), and
this process pointed at it the documented way: the CA bundle and proxy variables, and azure-identity's
``AZURE_*`` variables for its default credential chain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulators.aml import AmlEmulator, Timing


@pytest.fixture
def aml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AmlEmulator]:
    """Jobs move on by themselves, as in a real workspace (the contract suite waits for a trial's first step
    before it polls)."""
    timing = Timing(state_delay=0.02, cancel_grace=1.0, require_seen=False)
    emulator = AmlEmulator(tmp_path / "aml", timing=timing)
    emulator.start()
    try:
        for key, value in emulator.client_env().items():
            monkeypatch.setenv(key, value)
        emulator.configure(retryAfter=0)  # cancel's long-running operation is then polled at the SDK's pace
        yield emulator
    finally:
        emulator.stop()
