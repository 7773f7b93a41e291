"""Read-only connections to an experiment database, also on a full disk.

A WAL reader maps the database's ``-shm`` file, and SQLite writes a byte into each page of it as it grows: on a
full device that fails (``disk I/O error``, SQLITE_IOERR_SHMSIZE) and nothing can be read, though the database
itself is whole. Then the database is read without the shared memory: as an immutable file when its write-ahead
log is empty (the manager that wrote it closed it), else from a copy of both files in the temporary directory
(another device, usually), which is as current as the files were when copied.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from urllib.parse import quote


def connect(path: Path, full_disk: bool = False) -> tuple[sqlite3.Connection, Path | None]:
    """A read-only connection to ``path``, and the directory of the copy it reads (to remove once it is closed)
    or None; ``full_disk``: its device is full, read it without a ``-shm``."""
    if not full_disk:
        return _connect(f"file:{quote(str(path))}?mode=ro"), None
    wal = path.with_name(path.name + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return _connect(f"file:{quote(str(path))}?mode=ro&immutable=1"), None
    copy_dir = Path(tempfile.mkdtemp(prefix="trialfleet-read-"))
    copy = copy_dir / path.name
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        conn = _connect(str(copy))
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # the copy's log is read now
    except BaseException:
        shutil.rmtree(copy_dir, ignore_errors=True)
        raise
    return conn, copy_dir


def _connect(uri: str) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
