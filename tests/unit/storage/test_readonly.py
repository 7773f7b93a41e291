"""Reading a database without its -shm file, as on a full disk (storage/readonly.py; issue 44, item 7): the
rows still in the write-ahead log are read too (from a copy), and the copy goes with the store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from trialfleet.storage import readonly


def _database_with_rows_in_its_log(path: Path) -> sqlite3.Connection:
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("INSERT INTO t VALUES (1), (2)")
    return writer  # open: the log is not folded into the file


def test_a_database_whose_log_holds_rows_is_read_from_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    writer = _database_with_rows_in_its_log(path)
    assert path.with_name("db.sqlite-wal").stat().st_size > 0
    conn, copy_dir = readonly.connect(path, full_disk=True)
    assert copy_dir is not None and copy_dir.parent != tmp_path
    assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    conn.close()
    writer.close()
    shutil.rmtree(copy_dir)


def test_a_database_with_an_empty_log_is_read_as_immutable(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _database_with_rows_in_its_log(path).close()  # the last connection folds the log in
    conn, copy_dir = readonly.connect(path, full_disk=True)
    assert copy_dir is None
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
    assert not path.with_name("db.sqlite-shm").exists()
