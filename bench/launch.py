"""Workload 1 (launch overhead) and workload 6 (the same under 50 polling REST clients).

N trials that read their parameters and report one final metric, at concurrency C. Outside clock: wall time
just before ``create``; inside: each trial's ``startTime``/``endTime`` from ``/trial-jobs`` (the same host
clock). Gap = start of the i-th trial - end of the (i-C)-th, both sorted: how long a freed slot stays empty.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procs
from bench.floor_server import floor_server
from bench.rest import NNI_API, PollingClients, get_json, wait_for
from bench.stats import percentile
from bench.systems import Created, System, free_port

FINISHED = ("DONE", "ERROR", "STOPPED")
#: the floor server's body: about what 100 finished trials' ``/trial-jobs`` weighs (about 27 KB)
FLOOR_BODY_BYTES_PER_TRIAL = 270
#: the trial script of each kind, per system (NNI has no trialfleet SDK: its stdlib HTTP trial stands in)
SCRIPTS = {
    ("trialfleet", "nni"): "trial_nni.py",
    ("trialfleet", "sdk"): "trial_sdk.py",
    ("nni", "nni"): "trial_nni.py",
    ("nni", "sdk"): "trial_light.py",
}


@dataclass(frozen=True)
class LaunchSpec:
    kind: str  # "nni" or "sdk"
    trials: int
    concurrency: int
    load_clients: int = 0
    load_interval: float = 0.5
    timeout: float = 3600
    saturation_clients: int = 0  # after the run: this many clients without pause, for saturation_s seconds
    saturation_s: float = 3.0
    #: the clients poll a bare server (bench/floor_server.py) instead of the system, while its trials run
    floor: bool = False


def run_launch(
    system: System,
    workdir: Path,
    spec: LaunchSpec,
    bare_s: float,
    *,
    training_service: dict[str, Any] | None = None,
    python: str | None = None,
) -> dict[str, float]:
    script = SCRIPTS[(system.name, spec.kind)]
    name = (
        f"{system.name}-{spec.kind}-n{spec.trials}-c{spec.concurrency}-l{spec.load_clients}-{time.time_ns()}"
    )
    config = system.write_experiment(
        workdir / name,
        script,
        trials=spec.trials,
        concurrency=spec.concurrency,
        training_service=training_service,
        python=python,
    )
    created = system.create(config)
    try:
        return _measure(system, created, spec, bare_s)
    finally:
        system.stop(created.experiment_id)


def _measure(system: System, created: Created, spec: LaunchSpec, bare_s: float) -> dict[str, float]:
    pids = system.manager_pids(created.experiment_id)
    load = None
    routes = [f"{NNI_API}/trial-jobs", f"{NNI_API}/metric-data"]
    with contextlib.ExitStack() as stack:
        port = created.port
        if spec.floor:
            port = free_port()
            stack.enter_context(floor_server(port, FLOOR_BODY_BYTES_PER_TRIAL * spec.trials))
        with procs.ProcessSampler(pids) as sampler:
            if spec.load_clients:
                load = PollingClients("127.0.0.1", port, routes, spec.load_clients, spec.load_interval)
                with load:
                    status = _wait_finished(created, spec.timeout)
            else:
                status = _wait_finished(created, spec.timeout)
        jobs = get_json(created.base, "/trial-jobs")
        result = analyse(jobs, created, spec.concurrency, bare_s)
        if spec.saturation_clients:
            saturation = PollingClients(
                "127.0.0.1", port, routes, spec.saturation_clients, interval=0, max_requests=10**6
            )
            with saturation:
                time.sleep(spec.saturation_s)
            result.update(
                saturation_requests_per_s=saturation.requests_per_second,
                saturation_median_ms=percentile(saturation.latencies_ms, 50),
                saturation_errors=float(saturation.errors),
            )
    result.update(
        create_cmd_s=created.create_s,
        manager_rss_max_mib=sampler.rss_max_mib,
        manager_cpu_ms_per_trial=1000 * sampler.cpu_seconds / max(len(jobs), 1),
        machine_busy_pct=sampler.machine_busy_pct,
        finished_ok=float(status == "DONE"),
    )
    if load is not None:
        result.update(
            load_requests_per_s=load.requests_per_second,
            load_median_ms=percentile(load.latencies_ms, 50),
            load_p99_ms=percentile(load.latencies_ms, 99),
            load_errors=float(load.errors),
        )
    return result


def _wait_finished(created: Created, timeout: float) -> str:
    body = wait_for(created.base, "/check-status", lambda b: b.get("status") in FINISHED, timeout, poll=0.1)
    return str(body["status"])


def trial_dir(job: dict[str, Any]) -> Path | None:
    path = job.get("logPath") or ""
    path = path.removeprefix("local:").removeprefix("file://")
    return Path(path) if path.startswith("/") else None


def slot_gaps(starts: list[float], ends: list[float], concurrency: int) -> list[float]:
    """From sorted start and end times: how long each freed slot stayed empty (the i-th start minus the end
    of the (i-C)-th trial)."""
    return [
        starts[i] - ends[i - concurrency]
        for i in range(concurrency, min(len(starts), len(ends) + concurrency))
    ]


def analyse(
    jobs: list[dict[str, Any]], created: Created, concurrency: int, bare_s: float
) -> dict[str, float]:
    starts = sorted(j["startTime"] / 1000 for j in jobs if j.get("startTime"))
    ends = sorted(j["endTime"] / 1000 for j in jobs if j.get("endTime"))
    n = len(jobs)
    gaps = slot_gaps(starts, ends, concurrency)
    wall = ends[-1] - created.t_create if ends else math.nan
    slot = wall * concurrency / max(n, 1)
    cores = min(concurrency, os.cpu_count() or 1)
    durations = [
        (j["endTime"] - j["startTime"]) / 1000 for j in jobs if j.get("endTime") and j.get("startTime")
    ]
    return {
        "trials": float(n),
        "succeeded": float(sum(j.get("status") == "SUCCEEDED" for j in jobs)),
        "param_metric_mismatch": float(_mismatches(jobs)),
        "wall_s": wall,
        "first_running_s": starts[0] - created.t_create if starts else math.nan,
        "gap_median_s": percentile(gaps, 50),
        "gap_p90_s": percentile(gaps, 90),
        "trial_duration_median_s": percentile(durations, 50),
        "throughput_per_s": n / (ends[-1] - starts[0])
        if starts and ends and ends[-1] > starts[0]
        else math.nan,
        "slot_s": slot,
        "bare_trial_s": bare_s,
        "overhead_per_trial_s": slot - bare_s,
        # at C > cores the slot formula measures CPU oversubscription; per core it measures the manager
        "overhead_per_trial_per_core_s": wall * cores / max(n, 1) - bare_s,
        **_in_trial(jobs),
    }


def _mismatches(jobs: list[dict[str, Any]]) -> int:
    """Trials whose recorded parameters differ from what they ran with (each reports its x as its result)."""
    count = 0
    for job in jobs:
        try:
            recorded = json.loads(job["hyperParameters"][0])["parameters"]["x"]
            reported = _decode(job["finalMetricData"][0]["data"])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        count += abs(recorded - reported) > 1e-12
    return count


def _decode(data: str) -> Any:
    value = json.loads(data)
    while isinstance(value, str):
        value = json.loads(value)
    return value


def _in_trial(jobs: list[dict[str, Any]]) -> dict[str, float]:
    """Median split of a trial's life from its own timing record: start-up, parameters, exit."""
    spawn, params, exit_ = [], [], []
    for job in jobs:
        directory = trial_dir(job)
        timing_file = directory / "bench_timing.json" if directory else None
        if not timing_file or not timing_file.exists() or not job.get("endTime"):
            continue
        timing = json.loads(timing_file.read_text())
        spawn.append(timing["start"] - job["startTime"] / 1000)
        params.append(timing["param"] - timing["imported"])
        exit_.append(job["endTime"] / 1000 - timing["reported"])
    return {
        "in_trial_spawn_to_python_s": percentile(spawn, 50),
        "in_trial_get_parameter_s": percentile(params, 50),
        "in_trial_report_to_end_s": percentile(exit_, 50),
    }
