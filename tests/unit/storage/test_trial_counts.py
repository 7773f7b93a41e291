"""The trial counts kept by the store's triggers (schema 5) are those a scan of the trials table gives: after
every kind of write, after a process writing trials is killed, and after an older database is upgraded."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.storage.queries import TrialQueries
from trialfleet.storage.schema import MIGRATIONS, _set_version


def scanned(path: Path) -> dict[TrialStatus, int]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall()
    finally:
        conn.close()
    return {TrialStatus(s): n for s, n in rows}


def new_store(path: Path) -> ExperimentStore:
    store = ExperimentStore(path)
    store.init_experiment("e", {}, 0.0)
    return store


@pytest.mark.slow
def test_counts_follow_every_kind_of_write(tmp_path: Path) -> None:
    store = new_store(tmp_path / "db.sqlite")
    assert store.trial_counts() == {}
    rng = random.Random(7)
    ends = [TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.USER_CANCELED, TrialStatus.EARLY_STOPPED]
    for step in range(300):
        trial_id = f"t{step}"
        store.add_trial(trial_id, {"parameters": {"x": step}}, float(step))
        store.mark_submitted(trial_id, {"pid": step}, "local:/t", step + 0.1, running=rng.random() < 0.5)
        if rng.random() < 0.6:
            store.mark_running(trial_id, step + 0.2)
        if rng.random() < 0.7:
            store.end_trial(trial_id, rng.choice(ends), step + 0.3)
            if rng.random() < 0.2:
                store.retry_trial(trial_id, step + 0.4, "retry")  # back to WAITING
        assert store.trial_counts() == scanned(store.path), f"after step {step}"
    assert sum(store.trial_counts().values()) == 300
    assert len(store.trial_counts()) >= 4  # the writes did move trials through several statuses


WRITER = """
import sys
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore

store = ExperimentStore(sys.argv[1])
store.init_experiment("e", {}, 0.0)
step = 0
while True:
    trial_id = f"t{step}"
    store.add_trial(trial_id, {"parameters": {}}, float(step))
    store.mark_submitted(trial_id, {"pid": step}, "local:/t", float(step), running=True)
    if step % 3:
        store.end_trial(trial_id, TrialStatus.SUCCEEDED if step % 2 else TrialStatus.FAILED, float(step))
    step += 1
    if step == 200:
        print("written", flush=True)
"""


@pytest.mark.slow
def test_counts_are_right_after_the_writer_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(WRITER), str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "written\n"  # it is writing, mid-transaction or between two
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    resumed = ExperimentStore(path)  # as a resumed manager opens it
    counts = resumed.trial_counts()
    assert counts == scanned(path)
    assert sum(counts.values()) >= 200 and counts[TrialStatus.RUNNING] >= 1
    resumed.add_trial("after", {"parameters": {}}, 1e6)  # and they go on from there
    assert resumed.trial_counts() == scanned(path)


def test_a_version_4_database_gets_its_counts_from_its_trials(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("BEGIN;" + "".join(MIGRATIONS[v] for v in (1, 2, 3, 4)) + _set_version(4) + "COMMIT;")
    conn.execute("INSERT INTO experiment (id, config, status) VALUES ('e', '{}', 'STOPPED')")
    finals = ['{"default": 1, "loss": 2}', '{"loss": 1, "acc": NaN}', "0.5", None, "not json"]
    for sequence, status in enumerate(["SUCCEEDED", "SUCCEEDED", "FAILED", "WAITING", "SUCCEEDED"]):
        conn.execute(
            "INSERT INTO trials (id, sequence_id, parameter_source, parameters, status, submit_time, final_data) "
            "VALUES (?, ?, 'algorithm', '{}', ?, 1, ?)",
            (f"t{sequence}", sequence, status, finals[sequence]),
        )
    conn.commit()
    conn.close()
    upgraded = ExperimentStore(path)
    assert upgraded.trial_counts() == {
        TrialStatus.FAILED: 1,
        TrialStatus.SUCCEEDED: 3,
        TrialStatus.WAITING: 1,
    }
    upgraded.mark_submitted("t3", {"pid": 1}, "local:/t", 2.0, running=True)
    assert upgraded.trial_counts() == scanned(path)
    # SQLite's JSON reads no NaN: that trial's keys are not counted (the page's metric columns miss them)
    assert TrialQueries(upgraded).metric_keys() == ["loss"]
