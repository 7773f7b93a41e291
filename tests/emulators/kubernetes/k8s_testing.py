"""Helpers shared by the emulator's tests (waiting on conditions, small manifests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from tests.emulators.kubernetes import KubeletConfig, KubernetesEmulator

T = TypeVar("T")
DELAY = 0.02


def wait_for(condition: Callable[[], T], timeout: float = 20.0, message: str = "condition") -> T:
    """Poll ``condition`` until it returns something truthy (tests never sleep for a fixed time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.02)


def start(directory: Path, **options: Any) -> KubernetesEmulator:
    options.setdefault("delay", DELAY)
    options.setdefault("tick", 0.01)
    options.setdefault(
        "kubelet", KubeletConfig(create_delay=DELAY, restart_backoff=0.05, max_backoff=0.2, kill_grace=2.0)
    )
    return KubernetesEmulator(directory, **options).start()


def pod_manifest(name: str, command: str, *, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": ["bash", "-c", command]}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **spec.pop("metadata", {})},
        "spec": {"restartPolicy": restart, "containers": [container], **spec},
    }


def phase_of(core: client.CoreV1Api, name: str, namespace: str = "default") -> str | None:
    return core.read_namespaced_pod(name, namespace).status.phase


def log_or_empty(core: client.CoreV1Api, name: str, namespace: str = "default", **options: Any) -> str:
    """A pod's log, or "" while it cannot be read yet (pod not created or container not started)."""
    try:
        return core.read_namespaced_pod_log(name, namespace, **options)
    except client.ApiException as error:
        if error.status in (400, 404):
            return ""
        raise
