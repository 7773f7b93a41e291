"""The experiment store: one SQLite database (WAL) per experiment.

Contract:
* Every state change is one transaction: a trial's row, its metrics, its channel cursor and the events
  that explain the change are committed together or not at all, so a manager killed at any instant
  leaves a consistent database and every metric is stored exactly once.
* ``events`` is append-only: the timeline of each trial and of the experiment. ``trials`` holds each
  trial's current state, derived from the same writes (so a read never replays events).
* Finished trials are never edited, except to append retry attempts.
* One writer (the experiment's manager); any number of readers (CLI, REST threads) in other
  connections or processes. Rows returned are snapshots (plain dataclasses) that never change.
* Another process may take the write lock (a ``sqlite3`` shell's ``BEGIN IMMEDIATE``): readers never wait
  for it (WAL); a store opened with ``wait_for_lock=False`` raises StoreBusyError at once rather than wait.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialfleet.errors import NoSpaceError, StoreBusyError, StoreError
from trialfleet.status import ExperimentStatus, TrialStatus
from trialfleet.storage import readonly
from trialfleet.storage.damage import damaged, is_damage, refuse_corrupt
from trialfleet.storage.schema import migrate
from trialfleet.storage.sql import FINAL_DATA_SQL, order_by

DB_RELATIVE_PATH = Path("db") / "trialfleet.sqlite"


@dataclass(frozen=True)
class ExperimentRow:
    id: str
    config: dict[str, Any]
    status: ExperimentStatus
    error: str | None
    start_time: float | None
    end_time: float | None
    exec_duration: float
    next_sequence_id: int
    next_parameter_id: int
    revision: int
    manager_pid: int | None
    port: int | None


@dataclass(frozen=True)
class TrialRow:
    id: str
    sequence_id: int
    parameter_id: int | None
    parameter_source: str
    parameters: str  # the ParameterRecord JSON, exactly as given to the trial
    status: TrialStatus
    message: str | None
    failure_kind: str | None
    submit_time: float
    start_time: float | None
    end_time: float | None
    exit_code: int | None
    attempt: int
    handle: dict[str, Any] | None
    location: str | None
    cursor: dict[str, Any]
    final_data: str | None
    final_value: float | None
    #: the status the manager asked the running trial to end with (a cancel not yet seen to end), else None
    cancel_status: TrialStatus | None = None
    #: the platform (trainingService block) of its current attempt: set while it is being offered there, kept
    #: once submitted; None before any placement
    platform: str | None = None

    @property
    def hyper_parameters(self) -> Any:
        """The parameters the trial was given: a dict usually, any JSON value (NNI's BatchTuner)."""
        record: dict[str, Any] = json.loads(self.parameters)
        return record.get("parameters", {})


@dataclass(frozen=True)
class MetricRow:
    id: int
    trial_id: str
    parameter_id: int | None
    type: str
    sequence: int
    data: str
    timestamp: float
    attempt: int = 0


@dataclass(frozen=True)
class EventRow:
    id: int
    timestamp: float
    trial_id: str | None
    event: str
    data: dict[str, Any] | None


@dataclass(frozen=True)
class NewMetric:
    trial_id: str
    parameter_id: int | None
    type: str
    sequence: int
    data: str
    timestamp: float
    final_value: float | None = None  # the default metric of a FINAL one, for sorting
    attempt: int = 0  # the trial's attempt that reported it


_TRIAL_COLUMNS = (
    "id, sequence_id, parameter_id, parameter_source, parameters, status, message, failure_kind, submit_time, "
    "start_time, end_time, exit_code, attempt, handle, location, cursor, final_data, final_value, cancel_status, "
    "platform"
)


def _trial(row: Sequence[Any]) -> TrialRow:
    return TrialRow(
        id=row[0],
        sequence_id=row[1],
        parameter_id=row[2],
        parameter_source=row[3],
        parameters=row[4],
        status=TrialStatus(row[5]),
        message=row[6],
        failure_kind=row[7],
        submit_time=row[8],
        start_time=row[9],
        end_time=row[10],
        exit_code=row[11],
        attempt=row[12],
        handle=json.loads(row[13]) if row[13] else None,
        location=row[14],
        cursor=json.loads(row[15]),
        final_data=row[16],
        final_value=row[17],
        cancel_status=TrialStatus(row[18]) if row[18] else None,
        platform=row[19],
    )


_METRIC_COLUMNS = "m.id, m.trial_id, m.parameter_id, m.type, m.sequence, m.data, m.timestamp, m.attempt"
#: a metric of a trial's current attempt (``t`` is its trial)
_CURRENT_ATTEMPT = " JOIN trials t ON t.id = m.trial_id AND t.attempt = m.attempt"


def _metric(row: Sequence[Any]) -> MetricRow:
    return MetricRow(*row)


def _disk_full(exc: sqlite3.OperationalError, path: Path) -> bool:
    """SQLITE_FULL; or an I/O error on a device (nearly) full, as when the shared-memory file cannot grow."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code == SQLITE_FULL or (code is None and "disk is full" in str(exc)):
        return True
    if (code is not None and code & 0xFF == SQLITE_IOERR) or (code is None and "disk I/O error" in str(exc)):
        try:
            device = os.statvfs(path.parent)
        except OSError:
            return False
        return device.f_bavail * device.f_frsize < NEARLY_FULL_BYTES
    return False


SQLITE_FULL = 13
SQLITE_IOERR = 10
SQLITE_BUSY = 5
BUSY_TIMEOUT_MS = 30_000  # the connections' timeout=30
NEARLY_FULL_BYTES = 1 << 20


class ExperimentStore:
    """Access to one experiment's database. Thread-safe: one connection, guarded by a lock."""

    def __init__(self, path: str | Path, *, readonly: bool = False, wait_for_lock: bool = True) -> None:
        """``wait_for_lock=False``: a write finding the database locked by another process raises StoreBusyError
        at once instead of waiting (up to 30 s) for it, so that an event loop never blocks on it."""
        self.path = Path(path)
        self.readonly = readonly
        self.wait_for_lock = wait_for_lock
        self._copy_dir: Path | None = None  # a copy read on a full disk (storage/readonly.py)
        try:
            if readonly:
                if not self.path.exists():
                    raise StoreError(f"{self.path}: experiment database does not exist")
                self._conn = self._open_readonly()
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                refuse_corrupt(self._conn, self.path)
                migrate(self._conn, str(self.path))
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and _disk_full(exc, self.path):
                raise NoSpaceError(self.path) from exc
            if is_damage(exc):
                raise damaged(self.path, str(exc)) from exc
            raise StoreError(f"{self.path}: cannot open experiment database: {exc}") from exc
        self._conn.isolation_level = None  # explicit BEGIN/COMMIT in _transaction
        self._lock = threading.RLock()

    def _open_readonly(self) -> sqlite3.Connection:
        conn, _ = readonly.connect(self.path)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # maps the -shm file, which may not grow
        except sqlite3.OperationalError as exc:
            conn.close()
            if not _disk_full(exc, self.path):
                raise
            conn, self._copy_dir = readonly.connect(self.path, full_disk=True)
        return conn

    @classmethod
    def for_experiment_dir(
        cls, experiment_dir: str | Path, *, readonly: bool = False, wait_for_lock: bool = True
    ) -> ExperimentStore:
        return cls(Path(experiment_dir) / DB_RELATIVE_PATH, readonly=readonly, wait_for_lock=wait_for_lock)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        if self._copy_dir is not None:
            shutil.rmtree(self._copy_dir, ignore_errors=True)

    def check_intact(self) -> None:
        """StoreError saying how to recover when ``quick_check`` finds the database damaged."""
        with self._lock:
            refuse_corrupt(self._conn, self.path)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a full disk is NoSpaceError naming the database, and leaves it as it was."""
        with self._lock:
            try:
                self._begin()
                try:
                    yield self._conn
                    self._conn.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:  # SQLite may have rolled back already (a failed COMMIT)
                        self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError as exc:
                if _disk_full(exc, self.path):
                    raise NoSpaceError(self.path) from exc
                raise

    def _begin(self) -> None:
        if self.wait_for_lock:
            self._conn.execute("BEGIN IMMEDIATE")
            return
        # only the write lock is not waited for: reads of this connection keep the busy handler
        self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", SQLITE_BUSY) & 0xFF == SQLITE_BUSY and "locked" in str(exc):
                raise StoreBusyError(self.path) from exc
            raise
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def read_rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of a read query (views that have SQLite build their payloads, such as ``nni_json``)."""
        return self._query(sql, args)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as exc:
                if is_damage(exc):
                    raise damaged(self.path, str(exc)) from exc
                raise StoreError(f"{self.path}: {exc}") from exc

    @staticmethod
    def _event(
        conn: sqlite3.Connection, event: str, trial_id: str | None, data: Mapping[str, Any] | None, ts: float
    ) -> None:
        conn.execute(
            "INSERT INTO events (timestamp, trial_id, event, data) VALUES (?, ?, ?, ?)",
            (ts, trial_id, event, json.dumps(data) if data is not None else None),
        )

    # ---- experiment ------------------------------------------------------------------------------

    def init_experiment(self, experiment_id: str, config: Mapping[str, Any], now: float) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO experiment (id, config, status, start_time) VALUES (?, ?, ?, ?)",
                (experiment_id, json.dumps(config), ExperimentStatus.INITIALIZED.value, now),
            )
            self._event(conn, "EXPERIMENT_CREATED", None, None, now)

    def experiment(self) -> ExperimentRow:
        rows = self._query(
            "SELECT id, config, status, error, start_time, end_time, exec_duration, next_sequence_id, "
            "next_parameter_id, revision, manager_pid, port FROM experiment"
        )
        if not rows:
            raise StoreError(f"{self.path}: the database holds no experiment")
        r = rows[0]
        return ExperimentRow(
            r[0],
            json.loads(r[1]),
            ExperimentStatus(r[2]),
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            r[9],
            r[10],
            r[11],
        )

    def last_activity(self) -> float | None:
        """When the experiment last recorded anything (its newest event): the end of an experiment whose
        manager died without saying so."""
        rows = self._query("SELECT timestamp FROM events ORDER BY id DESC LIMIT 1")
        return float(rows[0][0]) if rows else None

    def update_experiment(self, now: float | None = None, event: str | None = None, **fields: Any) -> None:
        """Set experiment columns; ``config`` may be given as a mapping. Bumps ``revision``."""
        if "config" in fields and not isinstance(fields["config"], str):
            fields["config"] = json.dumps(fields["config"])
        for key in ("status",):
            if key in fields and fields[key] is not None:
                fields[key] = str(fields[key])
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self._transaction() as conn:
            conn.execute(
                f"UPDATE experiment SET {assignments}, revision = revision + 1",
                tuple(fields.values()),
            )
            if event:
                data = {k: v for k, v in fields.items() if k != "config"}
                self._event(conn, event, None, data, now if now is not None else time.time())

    # ---- trials ----------------------------------------------------------------------------------

    def add_trial(
        self,
        trial_id: str | Callable[[], str],
        parameter_record: Mapping[str, Any],
        now: float,
        *,
        message: str | None = None,
    ) -> TrialRow:
        """Create a WAITING trial, taking the next sequence id (and parameter id, when the record has none).

        ``trial_id`` is the trial's id, or a function that draws random ones: it is called, in the transaction
        that inserts the trial, until it gives an id no trial has. NNI's ids are 5 random characters, and
        among 10,000 of them two are the same with a probability of about 5%."""
        record = dict(parameter_record)
        with self._transaction() as conn:
            if callable(trial_id):
                draw = trial_id
                trial_id = draw()
                while conn.execute("SELECT 1 FROM trials WHERE id = ?", (trial_id,)).fetchone():
                    trial_id = draw()
            seq, next_pid = conn.execute(
                "SELECT next_sequence_id, next_parameter_id FROM experiment"
            ).fetchone()
            if record.get("parameter_id") is None:
                record["parameter_id"] = next_pid
            pid = record.get("parameter_id")
            new_next_pid = max(next_pid, pid + 1) if isinstance(pid, int) else next_pid
            conn.execute(
                "UPDATE experiment SET next_sequence_id = ?, next_parameter_id = ?", (seq + 1, new_next_pid)
            )
            conn.execute(
                "INSERT INTO trials (id, sequence_id, parameter_id, parameter_source, parameters, status, message, "
                "submit_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    trial_id,
                    seq,
                    pid,
                    record.get("parameter_source", "algorithm"),
                    json.dumps(record, allow_nan=False),  # SQLite's JSON functions read no NaN
                    TrialStatus.WAITING.value,
                    message,
                    now,
                ),
            )
            self._event(conn, "WAITING", trial_id, {"parameters": record, "sequence_id": seq}, now)
        return self.trial(trial_id)

    def allocate_parameter_ids(self, count: int) -> list[int]:
        with self._transaction() as conn:
            (next_pid,) = conn.execute("SELECT next_parameter_id FROM experiment").fetchone()
            conn.execute("UPDATE experiment SET next_parameter_id = ?", (next_pid + count,))
        return list(range(next_pid, next_pid + count))

    def set_waiting_reason(self, trial_id: str, reason: str | None, now: float | None = None) -> None:
        """Why a waiting trial waits (the message of a WAITING trial). A new reason is an event, so that the
        change feeds (the web UI's, the kept whole lists) see the trial change."""
        with self._transaction() as conn:
            changed = conn.execute(
                "UPDATE trials SET message = ? WHERE id = ? AND status = 'WAITING' AND message IS NOT ?",
                (reason, trial_id, reason),
            ).rowcount
            if changed:
                when = time.time() if now is None else now
                self._event(conn, "WAITING_REASON", trial_id, {"reason": reason}, when)

    def place_trial(self, trial_id: str, platform: str | None) -> None:
        """Record the platform a waiting trial is being offered to (None: none), before it is asked."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE trials SET platform = ? WHERE id = ? AND status = 'WAITING' AND handle IS NULL",
                (platform, trial_id),
            )

    def mark_submitted(
        self,
        trial_id: str,
        handle: Mapping[str, Any],
        location: str,
        now: float,
        *,
        running: bool,
        platform: str | None = None,
    ) -> None:
        status = TrialStatus.RUNNING if running else TrialStatus.WAITING
        with self._transaction() as conn:
            conn.execute(
                "UPDATE trials SET handle = ?, location = ?, message = NULL, cursor = '{}', status = ?, "
                "start_time = ?, platform = COALESCE(?, platform) WHERE id = ?",
                (
                    json.dumps(dict(handle)),
                    location,
                    status.value,
                    now if running else None,
                    platform,
                    trial_id,
                ),
            )
            data = {"handle": dict(handle), "location": location}
            if platform is not None:
                data["platform"] = platform
            self._event(conn, "SUBMITTED", trial_id, data, now)
            if running:
                self._event(conn, "RUNNING", trial_id, None, now)

    def request_cancel(self, trial_ids: Iterable[str], status: TrialStatus) -> None:
        """Record, before the request is sent, that the manager asks these unfinished trials to end with
        ``status``: a manager killed meanwhile learns the reason on resume."""
        # the stop's reason never replaces another; the user's or the assessor's replaces the stop's (the
        # trial a resumed manager re-adopted after an interrupted stop may then be canceled for good)
        reason = "COALESCE(cancel_status, ?)" if status is TrialStatus.SYS_CANCELED else "?"
        with self._transaction() as conn:
            conn.executemany(
                f"UPDATE trials SET cancel_status = {reason} WHERE id = ? AND status IN ('WAITING', 'RUNNING')",
                [(status.value, trial_id) for trial_id in trial_ids],
            )

    def mark_running(self, trial_id: str, now: float) -> None:
        with self._transaction() as conn:
            conn.execute(
                # why it waited (a platform's queue) no longer holds
                "UPDATE trials SET status = 'RUNNING', start_time = COALESCE(start_time, ?), message = NULL "
                "WHERE id = ? AND status = 'WAITING'",
                (now, trial_id),
            )
            self._event(conn, "RUNNING", trial_id, None, now)

    def add_metrics(self, metrics: Sequence[NewMetric], cursors: Mapping[str, Mapping[str, Any]]) -> set[str]:
        """Store metrics and the channel cursor after them, in one transaction (exactly-once delivery).
        The first FINAL metric of a trial becomes its final result: returns the trials whose final result these
        metrics set (their first FINAL among ``metrics``)."""
        rows = [
            (m.trial_id, m.parameter_id, m.type, m.sequence, m.data, m.timestamp, m.attempt) for m in metrics
        ]
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO metrics (trial_id, parameter_id, type, sequence, data, timestamp, attempt) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            finals = set()
            for m in metrics:
                if m.type == "FINAL" and m.trial_id not in finals:
                    set_now = conn.execute(
                        "UPDATE trials SET final_data = ?, final_value = ? WHERE id = ? AND final_data IS NULL",
                        (m.data, m.final_value, m.trial_id),
                    )
                    if set_now.rowcount:
                        finals.add(m.trial_id)
            for trial_id, cursor in cursors.items():
                conn.execute(
                    "UPDATE trials SET cursor = ? WHERE id = ?", (json.dumps(dict(cursor)), trial_id)
                )
        return finals

    def add_problem(self, trial_id: str, message: str, now: float) -> None:
        with self._transaction() as conn:
            self._event(conn, "TRIAL_ERROR", trial_id, {"message": message}, now)

    def end_trial(
        self,
        trial_id: str,
        status: TrialStatus,
        now: float,
        *,
        exit_code: int | None = None,
        message: str | None = None,
        failure_kind: str | None = None,
    ) -> None:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT attempt, start_time, location, platform FROM trials WHERE id = ?", (trial_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"unknown trial {trial_id}")
            conn.execute(
                "UPDATE trials SET status = ?, end_time = ?, exit_code = ?, message = ?, failure_kind = ?, "
                "cancel_status = NULL WHERE id = ?",
                (status.value, now, exit_code, message, failure_kind, trial_id),
            )
            conn.execute(
                "INSERT OR REPLACE INTO attempts (trial_id, attempt, status, message, failure_kind, exit_code, "
                "start_time, end_time, location, platform) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    trial_id,
                    row[0],
                    status.value,
                    message,
                    failure_kind,
                    exit_code,
                    row[1],
                    now,
                    row[2],
                    row[3],
                ),
            )
            self._event(
                conn,
                status.value,
                trial_id,
                {"exit_code": exit_code, "message": message, "failure_kind": failure_kind},
                now,
            )

    def retry_trial(self, trial_id: str, now: float, reason: str) -> TrialRow:
        """Start a new attempt of a finished trial with the same parameters (back to WAITING)."""
        with self._transaction() as conn:
            # the new attempt starts afresh: the earlier one's metrics stay with it (attempts, metrics.attempt)
            conn.execute(
                "UPDATE trials SET status = 'WAITING', attempt = attempt + 1, message = ?, handle = NULL, "
                "location = NULL, cursor = '{}', start_time = NULL, end_time = NULL, exit_code = NULL, "
                "failure_kind = NULL, final_data = NULL, final_value = NULL, cancel_status = NULL, platform = NULL "
                "WHERE id = ?",
                (reason, trial_id),
            )
            self._event(conn, "RETRY", trial_id, {"reason": reason}, now)
        return self.trial(trial_id)

    def trial(self, trial_id: str) -> TrialRow:
        rows = self._query(f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,))
        if not rows:
            raise StoreError(f"unknown trial {trial_id}")
        return _trial(rows[0])

    def current_attempts(self, trial_ids: Iterable[str]) -> dict[str, int]:
        """Each trial's current attempt, in one query (a poll's metrics name hundreds of trials)."""
        ids = list(trial_ids)
        result: dict[str, int] = {}
        for chunk in range(0, len(ids), 500):
            part = ids[chunk : chunk + 500]
            rows = self._query(
                f"SELECT id, attempt FROM trials WHERE id IN ({', '.join('?' for _ in part)})", part
            )
            result.update({r[0]: int(r[1]) for r in rows})
        missing = set(ids) - set(result)
        if missing:
            raise StoreError(f"unknown trial {sorted(missing)[0]}")
        return result

    def find_trial(self, trial_id: str) -> TrialRow | None:
        rows = self._query(f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,))
        return _trial(rows[0]) if rows else None

    def trials(
        self,
        *,
        status: TrialStatus | Iterable[TrialStatus] | None = None,
        offset: int = 0,
        limit: int | None = None,
        order: str = "sequenceId",
    ) -> list[TrialRow]:
        """Trials in ``order``: a sort key of :data:`~trialfleet.storage.sql.SORTS` (``-`` first: descending)."""
        sql = f"SELECT {_TRIAL_COLUMNS} FROM trials"
        args: list[Any] = []
        if status is not None:
            statuses = [status] if isinstance(status, TrialStatus) else list(status)
            sql += f" WHERE status IN ({', '.join('?' for _ in statuses)})"
            args += [s.value for s in statuses]
        order_sql, order_args = order_by(order.removeprefix("-"), descending=order.startswith("-"))
        sql += order_sql
        args += order_args
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        return [_trial(r) for r in self._query(sql, args)]

    def trials_with_ids(self, trial_ids: Sequence[str]) -> list[TrialRow]:
        """These trials (those that exist), by sequence id."""
        rows: list[Any] = []
        for start in range(0, len(trial_ids), 500):
            chunk = list(trial_ids[start : start + 500])
            rows += self._query(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id IN ({', '.join('?' for _ in chunk)})", chunk
            )
        return sorted((_trial(r) for r in rows), key=lambda row: row.sequence_id)

    def attempts(self, trial_id: str) -> list[dict[str, Any]]:
        rows = self._query(
            "SELECT attempt, status, message, failure_kind, exit_code, start_time, end_time, location, platform "
            "FROM attempts WHERE trial_id = ? ORDER BY attempt",
            (trial_id,),
        )
        keys = (
            "attempt",
            "status",
            "message",
            "failure_kind",
            "exit_code",
            "start_time",
            "end_time",
            "location",
            "platform",
        )
        return [dict(zip(keys, r, strict=False)) for r in rows]

    def trial_counts(self) -> dict[TrialStatus, int]:
        """Trials by status, as the triggers on ``trials`` keep them (schema 5): one row per status, so a poll
        costs the same at 100,000 trials as at 10."""
        return {TrialStatus(s): n for s, n in self._query("SELECT status, n FROM trial_counts WHERE n > 0")}

    # ---- metrics and events ----------------------------------------------------------------------

    def metrics(
        self,
        trial_id: str | None = None,
        *,
        type: str | None = None,
        after_id: int = 0,
        up_to_id: int | None = None,
        limit: int | None = None,
        every_attempt: bool = False,
    ) -> list[MetricRow]:
        """Metrics in the order they were stored: of each trial's current attempt (NNI's routes show those),
        or of every attempt; ids after ``after_id`` (and up to ``up_to_id``)."""
        sql = f"SELECT {_METRIC_COLUMNS} FROM metrics m"
        if not every_attempt:
            sql += _CURRENT_ATTEMPT
        sql += " WHERE m.id > ?"
        args: list[Any] = [after_id]
        if up_to_id is not None:
            sql += " AND m.id <= ?"
            args.append(up_to_id)
        if trial_id is not None:
            sql += " AND m.trial_id = ?"
            args.append(trial_id)
        if type is not None:
            sql += " AND m.type = ?"
            args.append(type)
        sql += " ORDER BY m.id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [_metric(r) for r in self._query(sql, args)]

    def final_metrics(self, trial_ids: Sequence[str] | None = None) -> list[MetricRow]:
        """The FINAL metrics of these trials' current attempts (of every trial when None; a list of ids goes
        through the per-trial index: one page of a trial list), of trials that have a final result by the rule
        every reader shares (:func:`~trialfleet.storage.sql.final_sql`: SUCCEEDED ones)."""
        select = (
            f"SELECT {_METRIC_COLUMNS} FROM metrics m{_CURRENT_ATTEMPT} "
            f"WHERE m.type = 'FINAL' AND ({FINAL_DATA_SQL}) IS NOT NULL"
        )
        if trial_ids is None:
            return [_metric(r) for r in self._query(select + " ORDER BY m.id", ())]
        rows: list[Any] = []
        for start in range(0, len(trial_ids), 500):
            chunk = list(trial_ids[start : start + 500])
            rows += self._query(
                f"{select} AND m.trial_id IN ({', '.join('?' for _ in chunk)}) ORDER BY m.id", chunk
            )
        return [_metric(r) for r in rows]

    def metrics_for_sequence_range(self, low: int, high: int) -> list[MetricRow]:
        return [
            _metric(r)
            for r in self._query(
                f"SELECT {_METRIC_COLUMNS} FROM metrics m{_CURRENT_ATTEMPT} "
                "WHERE t.sequence_id BETWEEN ? AND ? ORDER BY m.id",
                (low, high),
            )
        ]

    def latest_metrics(self) -> list[MetricRow]:
        """All FINAL metrics plus the newest PERIODICAL one per trial."""
        return [
            _metric(r)
            for r in self._query(
                f"SELECT {_METRIC_COLUMNS} FROM metrics m{_CURRENT_ATTEMPT} "
                "WHERE m.type != 'PERIODICAL' OR m.id IN (SELECT MAX(id) FROM metrics WHERE type = 'PERIODICAL' "
                "GROUP BY trial_id, attempt) ORDER BY m.id"
            )
        ]

    def metric_count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM metrics")[0][0])

    def events(self, trial_id: str | None = None, *, event: str | None = None) -> list[EventRow]:
        conditions, args = [], []
        for column, value in (("trial_id", trial_id), ("event", event)):
            if value is not None:
                conditions.append(f"{column} = ?")
                args.append(value)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = self._query(
            f"SELECT id, timestamp, trial_id, event, data FROM events{where} ORDER BY id", args
        )
        return [EventRow(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else None) for r in rows]

    def add_event(
        self, event: str, now: float, trial_id: str | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        with self._transaction() as conn:
            self._event(conn, event, trial_id, data, now)

    def add_trial_events(self, event: str, now: float, trial_ids: Sequence[str]) -> None:
        """The same event for many trials, in one transaction."""
        with self._transaction() as conn:
            for trial_id in trial_ids:
                self._event(conn, event, trial_id, None, now)

    # ---- imported data ---------------------------------------------------------------------------

    def add_imported_data(self, records: Sequence[Mapping[str, Any]], now: float) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO imported_data (timestamp, data) VALUES (?, ?)",
                (now, json.dumps(list(records), separators=(",", ":"))),
            )
            self._event(conn, "IMPORT_DATA", None, {"count": len(records)}, now)

    def imported_data(self) -> list[str]:
        return [r[0] for r in self._query("SELECT data FROM imported_data ORDER BY id")]

    def integrity_check(self) -> str:
        return str(self._query("PRAGMA integrity_check")[0][0])
