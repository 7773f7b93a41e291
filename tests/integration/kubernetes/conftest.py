"""Fixtures for the Kubernetes platforms' tests: an emulated cluster whose NFS export is ``tmp_path/nfs``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_helpers import start_cluster

from tests.emulators.kubernetes import KubernetesEmulator, NodeConfig


@pytest.fixture
def cluster(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubernetesEmulator]:
    # the cluster's own state is kept out of tmp_path, which tests search while pods come and go
    nodes = [NodeConfig("node-1", gpus=2), NodeConfig("node-2", gpus=2)]
    emulator = start_cluster(tmp_path, tmp_path_factory.mktemp("k8s"), nodes=nodes)
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []
