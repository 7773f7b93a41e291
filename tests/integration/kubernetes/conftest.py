"""Fixtures for the Kubernetes platforms' tests: an emulated cluster whose NFS export is ``tmp_path/nfs``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_helpers import start_cluster

from tests.emulators.kubernetes import KubernetesEmulator, NodeConfig


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start_cluster(tmp_path, nodes=[NodeConfig("node-1", gpus=2), NodeConfig("node-2", gpus=2)])
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []
