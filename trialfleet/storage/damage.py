"""What is wrong with a damaged experiment database, and how to recover: the words of every StoreError that
SQLite's ``database disk image is malformed`` (or ``file is not a database``) would otherwise be.

A truncated file (a copy cut short, a full disk during a copy) holds fewer pages than its header says; an index
missing rows is found by ``PRAGMA quick_check``. Either way nothing is written to it, and the message says how
to get out what can be read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trialfleet.errors import StoreError

SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
HEADER_SIZE = 100


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    return "malformed" in str(exc) or "not a database" in str(exc)


def truncation(path: Path) -> str | None:
    """'it is truncated: …' when the file is shorter than its header says, else None."""
    try:
        with open(path, "rb") as file:
            header = file.read(HEADER_SIZE)
        size = path.stat().st_size
    except OSError:
        return None
    if len(header) < HEADER_SIZE or not header.startswith(b"SQLite format 3\0"):
        return (
            f"it is truncated: it holds {size} bytes, not even a database header"
            if size < HEADER_SIZE
            else None
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    expected = page_size * int.from_bytes(header[28:32], "big")
    if size < expected:
        return f"it is truncated: it holds {size} of the {expected} bytes its header gives"
    return None


def damaged(path: Path, detail: str) -> StoreError:
    """The StoreError of a damaged database: ``detail`` is what SQLite (or quick_check) said."""
    cut = truncation(path)
    what = f"{cut} ({detail})" if cut else detail
    trials = path.parent.parent / "trials"
    return StoreError(
        f"{path}: the experiment database is corrupt: {what}; it is not written to. To recover: put back a copy "
        "of the file (with its -wal file) if there is one; "
        f"`sqlite3 {path} .dump | sqlite3 recovered.sqlite` copies the tables' rows SQLite can still read into a "
        "new database (put it in place of the old one, with the -wal and -shm files removed); while the database "
        "opens, `trialfleet experiment export <id> --type json --filename data.json` keeps the trials that read; "
        f"and each trial's directory ({trials}/<trial id>) still holds its parameters (parameter.cfg) and what it "
        "reported (.nni/metrics)"
    )


def refuse_corrupt(conn: sqlite3.Connection, path: Path) -> None:
    """StoreError saying what is wrong and how to recover when ``quick_check`` finds the database damaged: a
    manager never writes into a corrupt database (one that opens still reads, page by page)."""
    problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise damaged(path, f"PRAGMA quick_check: {'; '.join(problems)}")
