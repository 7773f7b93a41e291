"""The experiment database schema and its migrations.

Version history (never edit a released step; add one):
  1  experiment, trials, attempts, metrics, events (append-only), imported_data
  2  metrics.attempt: a metric belongs to the attempt of its trial that reported it (a re-run starts afresh);
     trials.cancel_status: why the manager asked a trial to end, stored before the request is sent
  3  trials.platform, attempts.platform: the trainingService block a trial attempt was placed on (hybrid
     experiments); set before the platform is asked, so a manager killed mid-submit offers it there again
  4  metrics_periodical: a partial index of the intermediate results by trial and index, for the web UI's
     /intermediate (which trials have any, or one at an index: one probe per trial, not a walk of its metrics)
  5  trial_counts: the number of trials in each status; final_keys: how many trials' final results (JSON
     objects) have each key but "default" (the trials table's metric columns). Both kept by triggers on trials,
     in the transaction that writes the trial (so right after any crash), for what every poll or page asks:
     a few rows instead of a scan of every trial
  6  trials_final_*: the trials in default-metric order (all, or of one status; each direction), so the best
     trials are one index range, not a sort of every trial
  7  trials_final_* again, on the final result every reader shows (``sql.FINAL_VALUE_SQL``: SUCCEEDED trials
     only, NNI's rule) instead of the stored column, so that order keeps being one index range
"""

from __future__ import annotations

import sqlite3

from trialfleet.errors import StoreError
from trialfleet.storage.sql import FINAL_VALUE_SQL

SCHEMA_VERSION = 7

_V1 = """
CREATE TABLE experiment (
    id                TEXT PRIMARY KEY,
    config            TEXT NOT NULL,
    status            TEXT NOT NULL,
    error             TEXT,
    start_time        REAL,
    end_time          REAL,
    exec_duration     REAL NOT NULL DEFAULT 0,
    next_sequence_id  INTEGER NOT NULL DEFAULT 0,
    next_parameter_id INTEGER NOT NULL DEFAULT 0,
    revision          INTEGER NOT NULL DEFAULT 0,
    manager_pid       INTEGER,
    port              INTEGER,
    tuner_checkpoint  TEXT
);
CREATE TABLE trials (
    id               TEXT PRIMARY KEY,
    sequence_id      INTEGER NOT NULL UNIQUE,
    parameter_id     INTEGER,
    parameter_source TEXT NOT NULL,
    parameters       TEXT NOT NULL,
    status           TEXT NOT NULL,
    message          TEXT,
    failure_kind     TEXT,
    submit_time      REAL NOT NULL,
    start_time       REAL,
    end_time         REAL,
    exit_code        INTEGER,
    attempt          INTEGER NOT NULL DEFAULT 0,
    handle           TEXT,
    location         TEXT,
    cursor           TEXT NOT NULL DEFAULT '{}',
    final_data       TEXT,
    final_value      REAL
);
CREATE INDEX trials_status ON trials(status);
CREATE TABLE attempts (
    trial_id     TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    status       TEXT NOT NULL,
    message      TEXT,
    failure_kind TEXT,
    exit_code    INTEGER,
    start_time   REAL,
    end_time     REAL,
    location     TEXT,
    PRIMARY KEY (trial_id, attempt)
);
CREATE TABLE metrics (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_id     TEXT NOT NULL,
    parameter_id INTEGER,
    type         TEXT NOT NULL,
    sequence     INTEGER NOT NULL,
    data         TEXT NOT NULL,
    timestamp    REAL NOT NULL
);
CREATE INDEX metrics_trial ON metrics(trial_id, id);
CREATE TABLE events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp REAL NOT NULL,
    trial_id  TEXT,
    event     TEXT NOT NULL,
    data      TEXT
);
CREATE INDEX events_trial ON events(trial_id, id);
CREATE TABLE imported_data (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp REAL NOT NULL,
    data      TEXT NOT NULL
);
"""

# metrics stored before version 2 are taken to be their trial's current attempt's, as they were shown
_V2 = """
ALTER TABLE metrics ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
UPDATE metrics SET attempt = (SELECT attempt FROM trials WHERE trials.id = metrics.trial_id);
CREATE INDEX metrics_trial_attempt ON metrics(trial_id, attempt, id);
ALTER TABLE trials ADD COLUMN cancel_status TEXT;
"""

# trials submitted before version 3 ran on the experiment's only platform (hybrid experiments did not start)
_V3 = """
ALTER TABLE trials ADD COLUMN platform TEXT;
ALTER TABLE attempts ADD COLUMN platform TEXT;
UPDATE trials SET platform = (SELECT json_extract(config, '$.trainingService.platform') FROM experiment)
    WHERE handle IS NOT NULL;
UPDATE attempts SET platform = (SELECT json_extract(config, '$.trainingService.platform') FROM experiment);
"""

_V4 = """
CREATE INDEX metrics_periodical ON metrics(trial_id, sequence) WHERE type = 'PERIODICAL';
"""

# the counts start from the trials there are; from then on each write of a trial's status moves them
_V5 = """
CREATE TABLE trial_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO trial_counts SELECT status, COUNT(*) FROM trials GROUP BY status;
CREATE TRIGGER trial_counts_insert AFTER INSERT ON trials BEGIN
    INSERT INTO trial_counts VALUES (new.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER trial_counts_delete AFTER DELETE ON trials BEGIN
    UPDATE trial_counts SET n = n - 1 WHERE status = old.status;
END;
CREATE TRIGGER trial_counts_update AFTER UPDATE OF status ON trials WHEN new.status IS NOT old.status BEGIN
    UPDATE trial_counts SET n = n - 1 WHERE status = old.status;
    INSERT INTO trial_counts VALUES (new.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
END;
CREATE TABLE final_keys (key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO final_keys SELECT key, COUNT(*) FROM trials, json_each({object_of_final}) AS j
    WHERE key != 'default' GROUP BY key;
CREATE TRIGGER final_keys_insert AFTER INSERT ON trials WHEN new.final_data IS NOT NULL BEGIN
    {add_new}
END;
CREATE TRIGGER final_keys_delete AFTER DELETE ON trials WHEN old.final_data IS NOT NULL BEGIN
    {remove_old}
END;
CREATE TRIGGER final_keys_update AFTER UPDATE OF final_data ON trials
    WHEN new.final_data IS NOT old.final_data BEGIN
    {remove_old}
    {add_new}
END;
"""


def _object_of(column: str) -> str:
    """The JSON object in ``column``, or an empty one (for NULL, a number, or what is not JSON)."""
    return f"COALESCE(CASE WHEN json_valid({column}) THEN CASE json_type({column}) WHEN 'object' THEN {column} END END, '{{}}')"


_V5 = _V5.format(
    object_of_final=_object_of("trials.final_data"),
    add_new=(
        f"INSERT INTO final_keys SELECT DISTINCT key, 1 FROM json_each({_object_of('new.final_data')}) "
        "WHERE key != 'default' ON CONFLICT (key) DO UPDATE SET n = n + 1;"
    ),
    remove_old=(
        f"UPDATE final_keys SET n = n - 1 WHERE key IN (SELECT key FROM json_each({_object_of('old.final_data')}));"
    ),
)

# the best trials (`trial ls`, NNI's and the web UI's lists sorted by the default metric), all or of one status,
# read as one index range: each index is order_by("finalMetric")'s ORDER BY, one per direction (the ties stay in
# submission order either way). Without them the first page sorted a temporary B-tree of every trial: 155 ms
# at 100,000 trials, against 0.3 ms
_V6 = """
CREATE INDEX trials_final_asc ON trials(final_value IS NULL, final_value, sequence_id);
CREATE INDEX trials_final_desc ON trials(final_value IS NULL, final_value DESC, sequence_id);
CREATE INDEX trials_status_final_asc ON trials(status, final_value IS NULL, final_value, sequence_id);
CREATE INDEX trials_status_final_desc ON trials(status, final_value IS NULL, final_value DESC, sequence_id);
"""

# the same indexes on the final result as read (an index on an expression serves a query written with the very
# same expression: order_by("finalMetric") writes FINAL_VALUE_SQL)
_F = FINAL_VALUE_SQL
_V7 = f"""
DROP INDEX trials_final_asc;
DROP INDEX trials_final_desc;
DROP INDEX trials_status_final_asc;
DROP INDEX trials_status_final_desc;
CREATE INDEX trials_final_asc ON trials(({_F}) IS NULL, ({_F}), sequence_id);
CREATE INDEX trials_final_desc ON trials(({_F}) IS NULL, ({_F}) DESC, sequence_id);
CREATE INDEX trials_status_final_asc ON trials(status, ({_F}) IS NULL, ({_F}), sequence_id);
CREATE INDEX trials_status_final_desc ON trials(status, ({_F}) IS NULL, ({_F}) DESC, sequence_id);
"""

#: MIGRATIONS[n] upgrades a database at version n-1 to version n
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7}


def current_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_info'").fetchone()
    if row is None:
        return 0
    version = conn.execute("SELECT version FROM schema_info").fetchone()
    return int(version[0]) if version else 0


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the database to SCHEMA_VERSION, one transaction per step."""
    version = current_version(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: database schema version {version} is newer than this trialfleet supports "
            f"({SCHEMA_VERSION}); upgrade trialfleet"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.executescript("BEGIN;" + MIGRATIONS[target] + _set_version(target) + "COMMIT;")


def _set_version(version: int) -> str:
    return (
        "CREATE TABLE IF NOT EXISTS schema_info (version INTEGER NOT NULL);"
        f"DELETE FROM schema_info; INSERT INTO schema_info VALUES ({version});"
    )
