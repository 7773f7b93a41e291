"""The benchmark suite stays runnable: its quick launch-overhead workload (10 trials) and its stop workload,
trialfleet only.

Timings are not checked here (they belong to bench/RESULTS.md); what is checked is that every run's trials
succeeded with the parameters they were given and that the report has its tables.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_quick_launch_workload_reports_every_run(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    env = {k: v for k, v in os.environ.items() if k != "NNI_VENV"}
    argv = ["--quick", "--only", "launch", "--trials", "10", "--reps", "1"]
    argv += ["--results", str(results), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        [sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    text = results.read_text()
    assert "NNI (baseline file, not re-measured)" in text
    rows = text.splitlines()
    titles = [r for r in rows if r.startswith("### 1. Launch overhead: 10 trials")]
    assert [("concurrency 2," in t, "trial does `import nni`" in t) for t in titles] == [
        (True, True),
        (False, True),
        (True, False),
        (False, False),
    ]
    succeeded = [r.split("|")[2].strip() for r in rows if r.startswith("| trials SUCCEEDED |")]
    assert succeeded == ["10.0"] * 4, _unsuccessful(tmp_path / "work")
    mismatched = [r.split("|")[2].strip() for r in rows if r.startswith("| trials whose recorded parameters")]
    assert mismatched == ["0.00"] * 4
    overheads = [r for r in rows if r.startswith("| **per-trial overhead**")]
    assert len(overheads) == 4 and all(r.split("|")[2].strip() not in ("", "-") for r in overheads)


def test_stop_workload_leaves_no_process_of_the_experiment(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    env = {k: v for k, v in os.environ.items() if k != "NNI_VENV"}
    argv = ["--quick", "--only", "stop", "--reps", "1", "--results", str(results), "--workdir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "bench", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = results.read_text().splitlines()
    before = [r.split("|")[2].strip() for r in rows if r.startswith("| processes of the experiment before")]
    left = [r.split("|")[2].strip() for r in rows if r.startswith("| processes left 30 s after")]
    assert len(before) == 1 and float(before[0]) >= 17  # 8 trials, their children, the manager (and keepers)
    assert left == ["0.00"], done.stdout[-2000:]


def test_keep_alive_bench_prints_both_variants_and_their_ratio() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.keepalive", "--requests", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["before", "now", "ratio"], done.stdout


def _unsuccessful(workdir: Path) -> str:
    """The trials stored as not SUCCEEDED, what the trials that did not exit 0 left, and the managers' warnings:
    the failure's own account."""
    told = []
    for manager_log in sorted(workdir.glob("*/experiments/*/log/manager.log")):
        lines = manager_log.read_text().splitlines()
        warnings = [
            line for line in lines if any(word in line for word in (" WARNING ", " ERROR ", "FAILED"))
        ]
        if warnings and not manager_log.parents[1].is_symlink():
            told += [f"== {manager_log}", *warnings[-20:]]
    for db in sorted(workdir.glob("*/experiments/*/db/trialfleet.sqlite")):
        if db.parents[1].is_symlink():
            continue
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            rows = conn.execute(
                "SELECT id, status, message FROM trials WHERE status != 'SUCCEEDED'"
            ).fetchall()
        told += [f"== {db}: trial {row[0]} {row[1]}: {row[2]}" for row in rows]
    for trial in sorted(workdir.glob("*/experiments/*/trials/*")):
        if trial.parents[1].is_symlink():
            continue
        result = trial / "result.json"
        if result.exists() and '"exit_code": 0,' in result.read_text():
            continue
        told.append(f"== {trial}: {result.read_text() if result.exists() else 'no result.json'}")
        for name in ("trial.stderr", "keeper.log", "trial.log"):
            if (trial / name).exists():
                told += [f"-- {name}", (trial / name).read_text()[-2000:]]
    return "\n".join(told)
