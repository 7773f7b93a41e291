"""The record of a manager's reuse workers (``batch/workers.py``'s WorkerRegistry), read back as a restarted manager
does: each worker with its job, and how long it has been idle on the wall clock; an unreadable record costs only
the re-adoption (its workers end themselves once idle), never the start."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from trialfleet.training_services.batch.workers import REGISTRY, Worker, WorkerRegistry


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_restarted_manager_reads_each_worker_and_how_long_it_was_idle(tmp_path: Path) -> None:
    before = Clock(1000.0)  # a monotonic clock of one process ...
    idle = Worker("w1", "job 1", "/shared/exp/workers/w1", idle_since=990.0)
    busy = Worker("w2", "job 2", "/shared/exp/workers/w2", trials={"t"})
    WorkerRegistry(tmp_path / REGISTRY, before).save([idle, busy])
    after = Clock(5.0)  # ... and of another, with another origin
    loaded = {w.name: w for w in WorkerRegistry(tmp_path / REGISTRY, after).load()}
    assert [(w.job_id, w.worker_dir) for w in loaded.values()] == [
        ("job 1", "/shared/exp/workers/w1"),
        ("job 2", "/shared/exp/workers/w2"),
    ]
    idle_for = after.now - loaded["w1"].idle_since  # type: ignore[operator]
    assert 10.0 <= idle_for < 10.0 + 5.0  # the 10 s before the restart count, with the time the test took
    assert loaded["w2"].idle_since == after.now  # it had a trial: idle from the restart on at the most
    assert not loaded["w1"].trials and not loaded["w2"].trials  # trials come back from their own handles


@pytest.mark.parametrize("content", ["{not json", '{"workers": [{"name": "w1"}]}', '{"workers": [1]}', "[]"])
def test_an_unreadable_record_is_said_and_re_adopts_nothing(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / REGISTRY
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        assert WorkerRegistry(path, time.monotonic).load() == []
    assert str(path) in caplog.text


def test_no_record_is_no_worker(tmp_path: Path) -> None:
    assert WorkerRegistry(tmp_path / REGISTRY, time.monotonic).load() == []
