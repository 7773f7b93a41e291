from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from trialfleet.errors import StoreError
from trialfleet.status import ExperimentStatus, TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.storage.schema import SCHEMA_VERSION, current_version


@pytest.fixture
def store(tmp_path: Path) -> ExperimentStore:
    s = ExperimentStore.for_experiment_dir(tmp_path)
    s.init_experiment("exp1", {"trialConcurrency": 2}, now=100.0)
    return s


def record(params: dict[str, object], pid: int | None = None) -> dict[str, object]:
    return {"parameter_id": pid, "parameter_source": "algorithm", "parameters": params, "parameter_index": 0}


def test_new_database_is_at_current_schema_in_wal_mode(store: ExperimentStore) -> None:
    conn = sqlite3.connect(store.path)
    assert current_version(conn) == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    s = ExperimentStore.for_experiment_dir(tmp_path)
    s.close()
    conn = sqlite3.connect(tmp_path / "db" / "trialfleet.sqlite")
    conn.execute("UPDATE schema_info SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        ExperimentStore.for_experiment_dir(tmp_path)


def test_trials_take_sequence_and_parameter_ids_in_order(store: ExperimentStore) -> None:
    a = store.add_trial("aaaaa", record({"x": 1}), now=101.0)
    b = store.add_trial("bbbbb", record({"x": 2}), now=102.0)
    assert (a.sequence_id, b.sequence_id) == (0, 1)
    assert (a.parameter_id, b.parameter_id) == (0, 1)
    assert store.allocate_parameter_ids(2) == [2, 3]
    c = store.add_trial("ccccc", record({"x": 3}, pid=3), now=103.0)
    assert c.parameter_id == 3 and store.allocate_parameter_ids(1) == [4]
    assert a.status is TrialStatus.WAITING and a.hyper_parameters == {"x": 1}


def test_metrics_cursor_and_final_are_one_transaction(store: ExperimentStore) -> None:
    store.add_trial("aaaaa", record({"x": 1}), now=1.0)
    store.mark_submitted("aaaaa", {"pid": 1}, "local:/t", now=2.0, running=True)
    metrics = [NewMetric("aaaaa", 0, "PERIODICAL", i, json.dumps(i / 10), 3.0) for i in range(3)]
    metrics.append(NewMetric("aaaaa", 0, "FINAL", 0, "0.9", 4.0, final_value=0.9))
    store.add_metrics(metrics, {"aaaaa": {"metrics": 400}})
    store.add_metrics(
        [NewMetric("aaaaa", 0, "FINAL", 0, "0.1", 5.0, final_value=0.1)], {"aaaaa": {"metrics": 500}}
    )
    trial = store.trial("aaaaa")
    assert trial.final_data == "0.9" and trial.final_value == 0.9  # the first FINAL wins, as in NNI
    assert trial.cursor == {"metrics": 500}
    assert [m.sequence for m in store.metrics("aaaaa", type="PERIODICAL")] == [0, 1, 2]
    assert [m.data for m in store.latest_metrics()] == ["0.2", "0.9", "0.1"]


def test_failed_transaction_leaves_nothing(store: ExperimentStore) -> None:
    store.add_trial("aaaaa", record({}), now=1.0)
    bad = [NewMetric("aaaaa", 0, "FINAL", 0, "1", 2.0), NewMetric("aaaaa", 0, None, 0, "2", 2.0)]  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):
        store.add_metrics(bad, {"aaaaa": {"metrics": 99}})
    assert store.metrics() == [] and store.trial("aaaaa").cursor == {}


def test_end_and_retry_keep_attempt_history_and_events(store: ExperimentStore) -> None:
    store.add_trial("aaaaa", record({}), now=1.0)
    store.mark_submitted("aaaaa", {"pid": 1}, "local:/t", now=2.0, running=True)
    store.end_trial(
        "aaaaa", TrialStatus.FAILED, now=3.0, exit_code=None, message="lost", failure_kind="infrastructure"
    )
    retried = store.retry_trial("aaaaa", now=4.0, reason="retry")
    assert retried.status is TrialStatus.WAITING and retried.attempt == 1 and retried.handle is None
    store.mark_submitted("aaaaa", {"pid": 2}, "local:/t.1", now=5.0, running=True)
    store.end_trial("aaaaa", TrialStatus.SUCCEEDED, now=6.0, exit_code=0)
    assert [a["status"] for a in store.attempts("aaaaa")] == ["FAILED", "SUCCEEDED"]
    events = [e.event for e in store.events("aaaaa")]
    assert events == [
        "WAITING",
        "SUBMITTED",
        "RUNNING",
        "FAILED",
        "RETRY",
        "SUBMITTED",
        "RUNNING",
        "SUCCEEDED",
    ]


def test_listing_pages_and_sorts_by_final_value(store: ExperimentStore) -> None:
    for i, value in enumerate([0.5, None, 0.9, 0.1]):
        tid = f"t{i:04d}"
        store.add_trial(tid, record({"i": i}), now=float(i))
        if value is not None:
            store.add_metrics([NewMetric(tid, i, "FINAL", 0, json.dumps(value), 1.0, value)], {})
            store.end_trial(tid, TrialStatus.SUCCEEDED, 2.0, exit_code=0)
    assert [t.id for t in store.trials(order="-finalMetric")] == ["t0002", "t0000", "t0003", "t0001"]
    assert [t.id for t in store.trials(offset=1, limit=2)] == ["t0001", "t0002"]
    assert store.trial_counts() == {TrialStatus.SUCCEEDED: 3, TrialStatus.WAITING: 1}


def test_only_a_succeeded_trial_has_a_final_result_to_sort_by(store: ExperimentStore) -> None:
    """NNI's rule (sql.final_sql): an early-stopped trial's FINAL metric is no final result, so it sorts with
    the trials that have none, and its metrics are not the store's final metrics."""
    for tid, status in (("stop", TrialStatus.EARLY_STOPPED), ("good", TrialStatus.SUCCEEDED)):
        store.add_trial(tid, record({}), now=1.0)
        store.add_metrics([NewMetric(tid, 0, "FINAL", 0, "0.9" if tid == "stop" else "0.1", 1.5, 0.9)], {})
        store.end_trial(tid, status, 2.0)
    store.add_trial("none", record({}), now=3.0)
    assert [t.id for t in store.trials(order="-finalMetric")] == ["good", "stop", "none"]
    assert [m.trial_id for m in store.final_metrics()] == ["good"]
    assert [m.trial_id for m in store.final_metrics(["stop", "good"])] == ["good"]


def test_experiment_updates_bump_revision(store: ExperimentStore) -> None:
    before = store.experiment().revision
    store.update_experiment(now=5.0, event="EXPERIMENT_RUNNING", status=ExperimentStatus.RUNNING.value)
    row = store.experiment()
    assert row.status is ExperimentStatus.RUNNING and row.revision == before + 1
    assert store.events()[-1].event == "EXPERIMENT_RUNNING"


def test_readers_in_other_connections_see_committed_state(store: ExperimentStore) -> None:
    reader = ExperimentStore(store.path, readonly=True)
    store.add_trial("aaaaa", record({}), now=1.0)
    assert [t.id for t in reader.trials()] == ["aaaaa"]
    with pytest.raises(sqlite3.OperationalError):
        reader._conn.execute("INSERT INTO events (timestamp, event) VALUES (1, 'x')")


def test_concurrent_writers_from_threads_serialise(store: ExperimentStore) -> None:
    def add(prefix: str) -> None:
        for i in range(50):
            store.add_trial(f"{prefix}{i:04d}", record({}), now=1.0)

    threads = [threading.Thread(target=add, args=(p,)) for p in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trials = store.trials()
    assert sorted(t.sequence_id for t in trials) == list(range(100))
    assert store.integrity_check() == "ok"


def test_metrics_belong_to_the_attempt_that_reported_them(store: ExperimentStore) -> None:
    store.add_trial("t1", record({"x": 1}), now=1.0)
    store.mark_submitted("t1", {"h": 0}, "local:/t1", 2.0, running=True)
    first = [NewMetric("t1", 0, "PERIODICAL", i, str(i), 3.0, attempt=0) for i in range(3)]
    store.add_metrics(
        [*first, NewMetric("t1", 0, "FINAL", 0, "0.5", 3.5, 0.5, attempt=0)], {"t1": {"metrics": 9}}
    )
    store.end_trial("t1", TrialStatus.FAILED, 4.0, message="lost", failure_kind="infrastructure")
    retried = store.retry_trial("t1", 5.0, "retry after: lost")
    assert (retried.attempt, retried.final_data, retried.final_value, retried.cursor) == (1, None, None, {})
    assert store.metrics("t1") == []  # NNI's routes show the current attempt's
    assert [m.data for m in store.metrics("t1", every_attempt=True)] == ["0", "1", "2", "0.5"]
    store.add_metrics([NewMetric("t1", 0, "PERIODICAL", 0, "10", 6.0, attempt=1)], {"t1": {"metrics": 3}})
    assert [(m.sequence, m.data, m.attempt) for m in store.metrics("t1")] == [(0, "10", 1)]
    assert [m.data for m in store.latest_metrics()] == ["10"]
    assert store.final_metrics(["t1"]) == []


def test_a_version_1_database_is_upgraded_with_its_metrics_kept(tmp_path: Path) -> None:
    from trialfleet.storage.schema import MIGRATIONS, _set_version

    path = tmp_path / "db" / "trialfleet.sqlite"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.executescript("BEGIN;" + MIGRATIONS[1] + _set_version(1) + "COMMIT;")
    conn.execute("INSERT INTO experiment (id, config, status) VALUES ('e', '{}', 'STOPPED')")
    conn.execute(
        "INSERT INTO trials (id, sequence_id, parameter_source, parameters, status, submit_time, attempt) "
        "VALUES ('t1', 0, 'algorithm', '{}', 'SUCCEEDED', 1, 2)"
    )
    conn.execute(
        "INSERT INTO metrics (trial_id, type, sequence, data, timestamp) VALUES ('t1', 'FINAL', 0, '0.5', 2)"
    )
    conn.commit()
    conn.close()
    upgraded = ExperimentStore(path)
    assert current_version(sqlite3.connect(path)) == SCHEMA_VERSION
    assert [(m.data, m.attempt) for m in upgraded.metrics("t1")] == [("0.5", 2)]  # shown as it was


def test_a_version_2_database_gets_each_submitted_trial_s_platform(tmp_path: Path) -> None:
    from trialfleet.storage.schema import MIGRATIONS, _set_version

    path = tmp_path / "db" / "trialfleet.sqlite"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.executescript("BEGIN;" + MIGRATIONS[1] + MIGRATIONS[2] + _set_version(2) + "COMMIT;")
    config = json.dumps({"trainingService": {"platform": "slurm", "sharedDirectory": "/s"}})
    conn.execute("INSERT INTO experiment (id, config, status) VALUES ('e', ?, 'STOPPED')", (config,))
    for trial_id, sequence, handle in (("ran", 0, '{"job_id": "7"}'), ("queued", 1, None)):
        conn.execute(
            "INSERT INTO trials (id, sequence_id, parameter_source, parameters, status, submit_time, handle) "
            "VALUES (?, ?, 'algorithm', '{}', 'WAITING', 1, ?)",
            (trial_id, sequence, handle),
        )
    conn.execute("INSERT INTO attempts (trial_id, attempt, status) VALUES ('ran', 0, 'FAILED')")
    conn.commit()
    conn.close()
    upgraded = ExperimentStore(path)
    assert (upgraded.trial("ran").platform, upgraded.trial("queued").platform) == ("slurm", None)
    assert upgraded.attempts("ran")[0]["platform"] == "slurm"


def test_a_trial_s_platform_is_kept_per_attempt_and_cleared_for_the_next(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path / "db.sqlite")
    store.init_experiment("e", {}, 0.0)
    store.add_trial("t1", {"parameters": {}}, 1.0)
    store.place_trial("t1", "remote")  # being offered to remote
    assert store.trial("t1").platform == "remote"
    store.place_trial("t1", None)  # it deferred everywhere
    assert store.trial("t1").platform is None
    store.mark_submitted("t1", {"pid": 1}, "h1:/t", 2.0, running=True, platform="remote")
    store.place_trial("t1", "local")  # a submitted trial's platform stays
    assert store.trial("t1").platform == "remote"
    store.end_trial("t1", TrialStatus.FAILED, 3.0, message="lost", failure_kind="infrastructure")
    retried = store.retry_trial("t1", 4.0, "retry after: lost")
    assert retried.platform is None
    store.mark_submitted("t1", {"pid": 2}, "local:/t", 5.0, running=True, platform="local")
    store.end_trial("t1", TrialStatus.SUCCEEDED, 6.0)
    assert [a["platform"] for a in store.attempts("t1")] == ["remote", "local"]


def test_a_full_database_is_no_space_naming_it_and_changes_nothing(store: ExperimentStore) -> None:
    from trialfleet.errors import NoSpaceError

    store.add_trial("aaaaa", record({}), now=1.0)
    store.add_metrics([NewMetric("aaaaa", 0, "PERIODICAL", 0, "0.5", 2.0)], {"aaaaa": {"metrics": 10}})
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")  # the database cannot grow: SQLITE_FULL
    big = [NewMetric("aaaaa", 0, "PERIODICAL", i, "x" * 4000, 3.0) for i in range(1, 50)]
    with pytest.raises(NoSpaceError) as caught:
        store.add_metrics(big, {"aaaaa": {"metrics": 99}})
    assert str(caught.value) == f"no space left on device ({store.path})"
    assert not store._conn.in_transaction  # the store stays usable
    assert [m.data for m in store.metrics()] == ["0.5"] and store.trial("aaaaa").cursor == {"metrics": 10}
    assert store.integrity_check() == "ok"
    store.add_problem("aaaaa", "small enough to fit", 4.0)


def test_a_version_3_database_gets_the_index_of_intermediate_results(tmp_path: Path) -> None:
    from trialfleet.storage.queries import SeriesSelection
    from trialfleet.storage.schema import MIGRATIONS, _set_version

    path = tmp_path / "db" / "trialfleet.sqlite"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.executescript("BEGIN;" + "".join(MIGRATIONS[v] for v in (1, 2, 3)) + _set_version(3) + "COMMIT;")
    conn.close()
    ExperimentStore(path).close()  # upgrades it
    conn = sqlite3.connect(path)
    for selection in (SeriesSelection(), SeriesSelection(step=2, low=0.5)):
        where, args = selection.where()
        plan = " ".join(
            r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN SELECT COUNT(*) FROM trials WHERE {where}", args)
        )
        assert "metrics_periodical" in plan, plan


def test_a_drawn_trial_id_that_is_taken_is_drawn_again(tmp_path: Path) -> None:
    """NNI's 5-character random ids collide: two of 10,000 are the same with a probability of about 5%."""
    store = ExperimentStore(tmp_path / "db.sqlite")
    store.init_experiment("e", {}, 0.0)
    store.add_trial("taken", {"parameters": {}}, 1.0)
    draws = iter(["taken", "taken", "fresh"])
    row = store.add_trial(lambda: next(draws), {"parameters": {"x": 1}}, 2.0)
    assert row.id == "fresh" and row.sequence_id == 1
    assert [t.id for t in store.trials()] == ["taken", "fresh"]
    with pytest.raises(sqlite3.IntegrityError):  # an id given as it is stays the caller's to choose
        store.add_trial("taken", {"parameters": {}}, 3.0)


def test_a_trial_that_starts_running_drops_its_waiting_reason(store: ExperimentStore) -> None:
    """DLTS and Ray say why a submitted job waits in their queue; once it runs, that reason no longer holds."""
    store.add_trial("aaaaa", record({"x": 1}), now=1.0)
    store.mark_submitted("aaaaa", {"job": 1}, "dlts:c:1", now=2.0, running=False)
    store.set_waiting_reason("aaaaa", "waiting in DLTS's queue", now=3.0)
    assert store.trial("aaaaa").message == "waiting in DLTS's queue"
    store.mark_running("aaaaa", now=4.0)
    assert store.trial("aaaaa").message is None


def _corrupt_an_index(path: Path) -> None:
    """Overwrite the first page of one of the trials table's indexes with garbage, as flipped bytes on disk do."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'trials' LIMIT 1"
    ).fetchone()
    conn.close()
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)


def test_a_corrupt_database_is_refused_for_writing_saying_how_to_recover(store: ExperimentStore) -> None:
    for n in range(50):
        store.add_trial(f"t{n}", record({"x": n}), now=100.0 + n)
    store.close()
    _corrupt_an_index(store.path)
    with pytest.raises(StoreError) as caught:
        ExperimentStore(store.path)
    message = str(caught.value)
    assert "is corrupt" in message and "quick_check" in message
    assert ".dump" in message and "experiment export" in message


def test_a_truncated_database_is_named_so_with_how_to_recover(store: ExperimentStore, tmp_path: Path) -> None:
    """Issue 44, item 8: a file cut short (a copy interrupted) said only 'database disk image is malformed', and
    `view` that its manager 'recorded no reason'."""
    from trialfleet.manager.launcher import _exited_while_starting

    for n in range(200):
        store.add_trial(f"t{n}", record({"x": "y" * 100}), now=100.0 + n)
    store.close()
    size = store.path.stat().st_size
    with store.path.open("r+b") as file:
        file.truncate(size // 2)
    for opened in (
        lambda: ExperimentStore(store.path, readonly=True).trials(),
        lambda: ExperimentStore(store.path),
    ):
        with pytest.raises(StoreError) as caught:
            opened()
        message = str(caught.value)
        assert f"is truncated: it holds {size // 2} of the {size} bytes" in message, message
        assert ".dump" in message and "parameter.cfg" in message
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "nnictl_stderr.log").touch()  # the manager of `view` said nothing there
    said = _exited_while_starting(1, tmp_path, 0)
    assert "recorded no reason" not in said and "is truncated" in said, said


def test_resume_of_a_corrupt_experiment_is_refused_before_its_manager_starts(
    store: ExperimentStore, tmp_path: Path
) -> None:
    from trialfleet.client import ExperimentRef
    from trialfleet.startup import check_relaunch

    for n in range(50):
        store.add_trial(f"t{n}", record({"x": n}), now=100.0 + n)
    store.close()
    _corrupt_an_index(store.path)
    ref = ExperimentRef("exp1", {"experimentDir": str(tmp_path), "status": "STOPPED"})
    with pytest.raises(StoreError, match="is corrupt"):
        check_relaunch(ref, "resume", 0)
