"""Issue 44, item 3: another process holding the experiment database's write lock (``BEGIN IMMEDIATE``, as a
``sqlite3`` shell or a backup tool does) neither stops a running manager's REST server nor kills the manager:
reads are answered while the lock is held, writes wait for it, and ``check-status`` (so ``trialfleet status``)
says the database is locked. The lock is held by a real second process, longer than SQLite's 30 s timeout
that used to end the manager with ``database is locked``."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.integration.cli_harness import Cli, free_port, wait_until, write_experiment

API = "/api/v1/nni"
#: SQLite's busy timeout of the manager's connection used to be 30 s, after which it died
OLD_FATAL_WAIT = 31.0

LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


def _hold_write_lock(database: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_a_database_locked_by_another_process_is_waited_out_and_reported(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    cli.ok("create", "-c", str(write_experiment(tmp_path, hold=True)), "-p", str(port))
    try:
        _locked_while_running(cli, port, next((tmp_path / "experiments").glob("[!_]*")))
    finally:
        cli.ok("stop", "--all")


def _locked_while_running(cli: Cli, port: int, experiment_dir: Path) -> None:
    database = experiment_dir / "db" / "trialfleet.sqlite"
    posted: dict[str, Any] = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}{API}", timeout=60) as http:
        wait_until(lambda: len(http.get("/trial-jobs?status=RUNNING").json()) > 0, "a running trial")
        holder = _hold_write_lock(database)
        locked_at = time.monotonic()
        try:

            def add_trial() -> None:  # a write: it waits for the lock
                posted["response"] = http.post("/trial-jobs", json={"x": 0.25})

            writer = threading.Thread(target=add_trial)
            writer.start()
            # the manager's own writes (the experiment's duration, every second) meet the lock: reads go on
            wait_until(lambda: "warnings" in http.get("/check-status").json(), "the lock to be reported")
            status = http.get("/check-status").json()
            assert status["status"] == "RUNNING"
            assert "locked by another process" in status["warnings"][0], status
            assert "locked by another process" in cli.ok("experiment", "status")
            assert http.get("/trial-jobs").status_code == 200
            assert http.get("/metric-data").status_code == 200
            assert "response" not in posted  # the write still waits
            wait_until(
                lambda: time.monotonic() - locked_at > OLD_FATAL_WAIT, "the old fatal wait to pass", 60
            )
            assert http.get("/check-status").json()["status"] == "RUNNING"
            assert holder.poll() is None  # the lock was held all along
        finally:
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)
        writer.join(timeout=60)
        assert posted["response"].status_code == 200, posted["response"].text
        wait_until(lambda: "warnings" not in http.get("/check-status").json(), "the lock's warning to go")
        trials = http.get("/trial-jobs").json()
        assert any('"x":0.25' in t["hyperParameters"][0] for t in trials), trials
    log = (experiment_dir / "log" / "manager.log").read_text()
    assert "is locked by another process; its writes wait for the lock" in log
    assert "can be written again" in log
