"""Fixtures: an emulator on a free port with the NFS export in ``tmp_path``, and an httpx client logged in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator


@pytest.fixture
def dlts(tmp_path: Path) -> Iterator[DltsEmulator]:
    with DltsEmulator(tmp_path / "nfs", kill_grace=0.2) as emulator:
        yield emulator


@pytest.fixture
def client(dlts: DltsEmulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=dlts.url, params=dlts.credentials, timeout=30) as http:
        yield http
