"""Fixtures: a running emulator per test, the process pointed at it, and a real ``MLClient``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# read once when azure.ai.ml is imported: stream's run-details polling backs off from 0 s instead of 2 s
os.environ.setdefault("AZUREML_RUN_POLLING_INTERVAL_MIN", "0")
os.environ.setdefault("AZUREML_RUN_POLLING_INTERVAL_MAX", "1")

from tests.emulators.aml import AmlEmulator, Timing


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02) -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(interval)


@pytest.fixture
def emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AmlEmulator]:
    instance = AmlEmulator(tmp_path / "aml", timing=Timing(state_delay=0.02, cancel_grace=1.0))
    instance.start()
    try:
        for key, value in instance.client_env().items():
            monkeypatch.setenv(key, value)
        instance.configure(retryAfter=0)  # LRO polls then use the poller's own (short) interval
        yield instance
    finally:
        instance.stop()


@pytest.fixture
def ml_client(emulator: AmlEmulator) -> Any:
    return emulator.ml_client()


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(
        "import os, sys\n"
        "print('cwd', os.getcwd())\n"
        "print('args', sys.argv[1:])\n"
        "print('FOO', os.environ.get('FOO'))\n"
    )
    (source / "data").mkdir()
    (source / "data" / "table.csv").write_text("a,b\n1,2\n")
    return source


@pytest.fixture(autouse=True)
def _azureml_cloud_stays_in_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """azure-ai-ml writes the cloud it used into os.environ (AZUREML_CURRENT_CLOUD); left there, it names a
    stopped emulator's cloud to every later process of the session (a CLI run fails on its metadata)."""
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
