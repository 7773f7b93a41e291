"""Helpers shared by the training-service unit tests."""

from __future__ import annotations

from typing import Any


def fake_gpu(index: int, *, memory_used: int = 0, utilization: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "uuid": f"GPU-{index:08d}-fake-4a4a-9b9b-00000000000{index}",
        "name": "Tesla T4",
        "memory_total": 15360,
        "memory_used": memory_used,
        "utilization": utilization,
    }
