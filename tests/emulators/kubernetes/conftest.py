"""Fixtures for the emulator's own tests: a started cluster and the official client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import start


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start(tmp_path / "cluster")
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


@pytest.fixture
def api(cluster: KubernetesEmulator) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig))


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
