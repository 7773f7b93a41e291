"""Workload 5, resume: kill -9 the manager of an experiment whose trials run, ``resume``, time the re-adoption.

Measured: ``resume`` command time, and the time from just before ``resume`` until every surviving trial shows
RUNNING again with an ADOPTED event in the store; checked: no trial was started a second time (each trial
appends its pid to ``bench_starts.log`` when it starts) and none was given another attempt.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.launch import trial_dir
from bench.rest import wait_for
from bench.systems import System, free_port


def run_resume(system: System, workdir: Path, trials: int, timeout: float = 600) -> dict[str, float]:
    name = f"{system.name}-resume-{trials}-{time.time_ns()}"
    env = {"BENCH_SECONDS": str(int(timeout))}
    config = system.write_experiment(
        workdir / name, "trial_sleep.py", trials=trials, concurrency=trials, env=env
    )
    created = system.create(config)
    experiments = workdir / name / "experiments"
    try:
        wait_for(created.base, "/trial-jobs", lambda jobs: _running(jobs) == trials, timeout, poll=0.2)
        pid = system.manager_pid(created.experiment_id)
        assert pid is not None, f"no {system.name} manager process for {created.experiment_id}"
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.01)
        port = free_port()
        t0 = time.time()
        resume_s = system.resume(created.experiment_id, port, experiments)
        base = f"http://127.0.0.1:{port}/api/v1/nni"
        db = experiments / created.experiment_id / "db" / "trialfleet.sqlite"
        jobs = wait_for(
            base, "/trial-jobs", lambda j: _running(j) == trials and _adopted(db) >= trials, timeout
        )
        adopted_s = time.time() - t0
        return {
            "trials": float(trials),
            "resume_cmd_s": resume_s,
            "resume_to_all_adopted_s": adopted_s,
            "adopted": float(_adopted(db)),
            "re_run": float(_re_run(jobs)),
            "extra_attempts": float(_query(db, "SELECT COUNT(*) FROM trials WHERE attempt > 0")),
        }
    finally:
        system.stop(created.experiment_id)


def _running(jobs: list[dict[str, Any]]) -> int:
    return sum(1 for job in jobs if job.get("status") == "RUNNING")


def _adopted(db: Path) -> int:
    """Trials with an ADOPTED event, read from the store the resumed manager writes."""
    return _query(db, "SELECT COUNT(DISTINCT trial_id) FROM events WHERE event = 'ADOPTED'")


def _query(db: Path, sql: str) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
            row = connection.execute(sql).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row else 0


def _re_run(jobs: list[dict[str, Any]]) -> int:
    """Trials whose process was started more than once."""
    count = 0
    for job in jobs:
        directory = trial_dir(job)
        starts = directory / "bench_starts.log" if directory else None
        if starts is not None and starts.exists() and len(starts.read_text().split()) > 1:
            count += 1
    return count
