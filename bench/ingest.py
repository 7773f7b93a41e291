"""Workload 2, metric ingestion: one trial reports N intermediate results as fast as it can, then a final one.

Measured: the trial's own reporting time (from its timing record), the time until all N + 1 are visible over
``/metric-data``, and how many were lost, duplicated or reordered on the way (each value is its index).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path
from typing import Any

from bench import procs
from bench.launch import trial_dir
from bench.rest import get_json, try_get_json
from bench.systems import Created, System


def run_ingest(system: System, workdir: Path, count: int, timeout: float = 900) -> dict[str, float]:
    name = f"{system.name}-metrics-{count}-{time.time_ns()}"
    env = {"BENCH_N": str(count), "BENCH_DELAY": "3"}
    config = system.write_experiment(workdir / name, "trial_metrics.py", trials=1, concurrency=1, env=env)
    created = system.create(config)
    try:
        return _measure(system, created, count, timeout)
    finally:
        system.stop(created.experiment_id)


def _measure(system: System, created: Created, count: int, timeout: float) -> dict[str, float]:
    pids = system.manager_pids(created.experiment_id)
    deadline = time.monotonic() + timeout
    with procs.ProcessSampler(pids) as sampler:
        _wait_for_trial_to_report(created, deadline)
        final_seen = _wait_for_final(created, deadline)
        seen_all = _wait_for_all(created, count + 1, deadline)
    (job,) = get_json(created.base, "/trial-jobs")
    rows = get_json(created.base, f"/metric-data/{job['trialJobId']}")
    result = check_stream(rows, count)
    directory = trial_dir(job)
    timing_path = directory / "bench_timing.json" if directory else None
    if timing_path is not None and timing_path.exists():
        timing = json.loads(timing_path.read_text())
        loop = timing["intermediate_done"] - timing["param"]
        result.update(
            trial_report_loop_s=loop,
            trial_reports_per_s=count / loop if loop > 0 else math.inf,
            last_report_to_final_visible_s=final_seen - timing["reported"],
            last_report_to_all_visible_s=seen_all - timing["reported"],
            end_to_end_metrics_per_s=(count + 1) / (seen_all - timing["param"]),
        )
    result.update(manager_rss_max_mib=sampler.rss_max_mib, manager_cpu_s=sampler.cpu_seconds)
    return result


def _wait_for_trial_to_report(created: Created, deadline: float) -> None:
    """Until the trial's timing record exists, i.e. it has reported everything. The REST routes are not polled
    meanwhile: NNI answers them from every stored metric, so polling would slow down what is measured."""
    timing = None
    while time.monotonic() < deadline:
        if timing is None:
            jobs = try_get_json(created.base, "/trial-jobs") or []
            directory = trial_dir(jobs[0]) if jobs else None
            timing = directory / "bench_timing.json" if directory else None
        if timing is not None and timing.exists():
            return
        time.sleep(0.01 if timing else 0.2)


def _wait_for_final(created: Created, deadline: float) -> float:
    """When the final result shows on the small ``/metric-data-latest`` (polled every 20 ms)."""
    while time.monotonic() < deadline:
        rows = try_get_json(created.base, "/metric-data-latest/") or []
        if any(row.get("type") == "FINAL" for row in rows):
            return time.time()
        time.sleep(0.02)
    return math.nan


def _wait_for_all(created: Created, want: int, deadline: float) -> float:
    """When a client first received the whole list with every result in it (the end of that response)."""
    while time.monotonic() < deadline:
        rows = try_get_json(created.base, "/metric-data", timeout=60) or []
        if len(rows) >= want:
            return time.time()
        time.sleep(0.02)
    return math.nan


def check_stream(rows: list[dict[str, Any]], count: int) -> dict[str, float]:
    """Lost, duplicated and reordered intermediate results in the order the REST response lists them."""
    values = [_decode(r["data"]) for r in rows if r["type"] == "PERIODICAL"]
    finals = [r for r in rows if r["type"] == "FINAL"]
    return {
        "periodical_received": float(len(values)),
        "final_received": float(len(finals)),
        "lost": float(len(set(range(count)) - set(values))),
        "duplicated": float(len(values) - len(set(values))),
        "reordered": float(sum(1 for a, b in itertools.pairwise(values) if b < a)),
    }


def _decode(data: str) -> Any:
    value = json.loads(data)
    while isinstance(value, str):
        value = json.loads(value)
    return value
