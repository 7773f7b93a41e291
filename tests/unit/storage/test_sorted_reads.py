"""The best trials (sorted by the default metric, missing values last, all or of one status) are read from an
index in either direction (schema 6): the first page reads a few rows however many trials there are, and an
older database gets the indexes when it is opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.schema import MIGRATIONS, _set_version
from trialfleet.storage.sql import order_by


def filled(path: Path) -> ExperimentStore:
    store = ExperimentStore(path)
    store.init_experiment("e", {}, 0.0)
    for i, value in enumerate([0.5, None, 0.9, 0.1, 0.9, None]):
        tid = f"t{i}"
        store.add_trial(tid, {"parameter_id": i, "parameters": {}}, float(i))
        store.mark_submitted(tid, {}, f"simulated:{tid}", float(i), running=True)
        if value is not None:
            store.add_metrics([NewMetric(tid, i, "FINAL", 0, str(value), i + 0.5, final_value=value)], {})
            store.end_trial(tid, TrialStatus.SUCCEEDED, i + 0.9, exit_code=0)
    return store


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("where", ["", " WHERE status IN (?)"])
def test_the_best_trials_are_read_from_an_index(tmp_path: Path, descending: bool, where: str) -> None:
    filled(tmp_path / "db.sqlite").close()
    order, args = order_by("finalMetric", descending=descending)
    sql = f"SELECT id FROM trials{where}{order} LIMIT 10"
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ["SUCCEEDED"] * bool(where) + args))
    assert "TEMP B-TREE" not in plan and "trials_final" in plan.replace("status_final", "final"), plan


def test_the_order_is_the_sort_keys(tmp_path: Path) -> None:
    store = filled(tmp_path / "db.sqlite")
    assert [t.id for t in store.trials(order="-finalMetric")] == ["t2", "t4", "t0", "t3", "t1", "t5"]
    assert [t.id for t in store.trials(order="finalMetric")] == ["t3", "t0", "t2", "t4", "t1", "t5"]
    best = store.trials(status=TrialStatus.SUCCEEDED, order="-finalMetric", limit=2)
    assert [t.id for t in best] == ["t2", "t4"]


def test_a_version_5_database_gets_the_indexes(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("".join(MIGRATIONS[v] for v in range(1, 6)) + _set_version(5))
    conn.close()
    ExperimentStore(path).close()
    names = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"trials_final_asc", "trials_final_desc", "trials_status_final_asc", "trials_status_final_desc"} <= names
