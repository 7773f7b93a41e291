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
    env = {"BENCH_N": str(count)}
    config = system.write_experiment(workdir / name, "trial_metrics.py", trials=1, concurrency=1, env=env)
    created = system.create(config)
    try:
        return _measure(system, created, count, timeout)
    finally:
        system.stop(created.experiment_id)


def _measure(system: System, created: Created, count: int, timeout: float) -> dict[str, float]:
    pids = system.manager_pids(created.experiment_id)
    want = count + 1
    seen_all = math.nan
    deadline = time.monotonic() + timeout
    with procs.ProcessSampler(pids) as sampler:
        while time.monotonic() < deadline:
            rows = try_get_json(created.base, "/metric-data", timeout=60) or []
            if len(rows) >= want:
                seen_all = time.time()
                break
            time.sleep(0.05)
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
            last_report_to_all_visible_s=seen_all - timing["reported"],
            end_to_end_metrics_per_s=want / (seen_all - timing["param"]),
        )
    result.update(manager_rss_max_mib=sampler.rss_max_mib, manager_cpu_s=sampler.cpu_seconds)
    return result


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
