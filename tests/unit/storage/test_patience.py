"""The manager's writes while another connection holds the database's write lock (issue 44, item 3): they do not
block the event loop, they are made once the lock is released, in the order they were asked for, and the wait
is reported while it lasts."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from trialfleet.errors import StoreBusyError
from trialfleet.storage import ExperimentStore
from trialfleet.storage.patience import PatientWrites


@pytest.fixture
def store(tmp_path: Path) -> ExperimentStore:
    created = ExperimentStore(tmp_path / "db.sqlite")
    created.init_experiment("exp", {}, 0.0)
    created.close()
    return ExperimentStore(tmp_path / "db.sqlite", wait_for_lock=False)


def _lock(store: ExperimentStore) -> sqlite3.Connection:
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_locked_database_refuses_a_write_at_once_but_still_reads(store: ExperimentStore) -> None:
    other = _lock(store)
    with pytest.raises(StoreBusyError, match="locked by another process"):
        store.add_event("X", 1.0)
    assert store.experiment().id == "exp"  # a WAL reader does not wait for a writer
    other.execute("COMMIT")
    store.add_event("X", 1.0)


def test_writes_wait_for_the_lock_in_order_without_blocking_the_loop(store: ExperimentStore) -> None:
    write = PatientWrites(store.path)

    async def scenario() -> list[str]:
        other = _lock(store)
        write.soon(store.add_event, "FIRST", 1.0)  # queued: the lock is taken
        waiting = asyncio.ensure_future(write(store.add_event, "SECOND", 2.0))
        await asyncio.sleep(0)  # it is asked for now
        write.soon(store.add_event, "THIRD", 3.0)
        ticks = 0
        while write.warning() is None or ticks < 5:  # the loop goes on meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        assert "locked by another process" in (write.warning() or "")
        assert not waiting.done()
        other.execute("COMMIT")
        await waiting
        await write.drain()
        return [e.event for e in store.events() if e.event != "EXPERIMENT_CREATED"]

    assert asyncio.run(scenario()) == ["FIRST", "SECOND", "THIRD"]
    assert write.warning() is None
