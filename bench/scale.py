"""Workload 3, scale: an experiment of N short trials (concurrency 8).

Measured: the manager's RSS and CPU time per trial, the database size, and REST latency (median, p99) of
NNI's list routes and of every route the web UI polls, once while the experiment runs (when half of the
trials have finished) and once idle after the last one. Each request for one of NNI's whole lists is
followed by one for as many bytes from a server that only answers (:mod:`bench.floor_server`): the time to
send them, taken by the same client, in turns with the list, so that both see the same trials load the
machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench import procs
from bench.floor_server import floor_server
from bench.rest import Latency, get_json, measure_latency, try_get_json, wait_for
from bench.stats import percentile
from bench.systems import Created, System, free_port

TF = "/api/v1/trialfleet"
NNI = "/api/v1/nni"
#: polled by trialfleet's web UI (``webui/static/js/api.js``); the targets apply to these
UI_ROUTES = (
    f"{TF}/changes?cursor={{cursor}}",
    f"{TF}/changes",
    f"{TF}/experiment",
    f"{TF}/trials?offset=0&limit=20&sort=sequenceId&order=desc",
    f"{TF}/trials?offset=0&limit=50&sort=final&order=desc&status=SUCCEEDED",
    f"{TF}/trials/all",
    f"{TF}/trials/{{trial}}",
    f"{TF}/trials/{{trial}}/metrics",
    f"{TF}/intermediate?key=default",
    f"{NNI}/trial-jobs?offset=0&limit=50",
    f"{NNI}/experiment",
)
#: NNI's whole-list routes (NNI's own UI polls them; trialfleet's only downloads them on request)
LIST_ROUTES = (f"{NNI}/trial-jobs", f"{NNI}/metric-data")


@dataclass(frozen=True)
class ScaleSpec:
    trials: int
    concurrency: int = 8
    intermediate: int = 3
    requests: int = 100  # per UI route and probe
    list_requests: int = 20  # per whole-list route and probe
    timeout: float = 7200


def run_scale(
    system: System, workdir: Path, spec: ScaleSpec
) -> tuple[dict[str, float], list[Latency], list[Latency]]:
    """(figures, latencies while running, latencies idle at the end). Each list of latencies ends with the
    send floors of NNI's whole lists (routes ``send <route>``)."""
    name = f"{system.name}-scale-{spec.trials}-{time.time_ns()}"
    env = {"BENCH_INTERMEDIATE": str(spec.intermediate)}
    config = system.write_experiment(
        workdir / name, "trial_sdk.py", trials=spec.trials, concurrency=spec.concurrency, env=env
    )
    created = system.create(config)
    try:
        return _measure(system, created, spec, workdir / name / "experiments" / created.experiment_id)
    finally:
        system.stop(created.experiment_id)


def _measure(
    system: System, created: Created, spec: ScaleSpec, experiment_dir: Path
) -> tuple[dict[str, float], list[Latency], list[Latency]]:
    pids = system.manager_pids(created.experiment_id)
    with procs.ProcessSampler(pids, interval=1.0) as sampler:
        wait_for(
            created.base, "/job-statistics", lambda s: _finished(s) >= spec.trials // 2, spec.timeout, 0.5
        )
        sampler.take()
        cpu_before = sampler.samples[-1].cpu
        running = probe(created, spec)
        sampler.take()
        probe_cpu = sampler.samples[-1].cpu - cpu_before
        wait_for(
            created.base, "/check-status", lambda s: s.get("status") in ("DONE", "ERROR"), spec.timeout, 0.5
        )
        sampler.take()
    idle = probe(created, spec)
    figures = {
        "trials_finished": float(_finished(get_json(created.base, "/job-statistics"))),
        "manager_rss_max_mib": sampler.rss_max_mib,
        "manager_rss_end_mib": sampler.rss_last_mib,
        "manager_cpu_ms_per_trial": 1000 * (sampler.cpu_seconds - probe_cpu) / spec.trials,
        "db_mib": sum(f.stat().st_size for f in (experiment_dir / "db").glob("*")) / 2**20,
        "wall_s": time.time() - created.t_create,
    }
    return figures, running, idle


def _finished(statistics: list[dict[str, object]]) -> int:
    final = {"SUCCEEDED", "FAILED", "USER_CANCELED", "SYS_CANCELED", "EARLY_STOPPED"}
    return sum(int(s["trialJobNumber"]) for s in statistics if s["trialJobStatus"] in final)  # type: ignore[call-overload]


def send_route(route: str) -> str:
    return f"send {route}"


def probe(created: Created, spec: ScaleSpec) -> list[Latency]:
    """Latency of each route, its placeholders filled with a live cursor and a finished trial, then of each
    whole list, then the time to send each list's bytes (routes ``send <route>``)."""
    changes = try_get_json(created.root, f"{TF}/changes") or {}
    first = get_json(created.base, "/trial-jobs?offset=0&limit=1&status=SUCCEEDED")
    values = {"cursor": changes.get("cursor", ""), "trial": first[0]["trialJobId"] if first else ""}
    found = [
        measure_latency(created.root, route.format(**values), spec.requests, route) for route in UI_ROUTES
    ]
    lists = [_list_and_send(created, route, spec.list_requests) for route in LIST_ROUTES]
    return found + [whole for whole, _ in lists] + [send for _, send in lists]


def _list_and_send(created: Created, route: str, requests: int) -> tuple[Latency, Latency]:
    """A whole list's latency and the time to send its bytes, their requests in turns: a trial that starts
    or a flush of the store slows both alike."""
    size = measure_latency(created.root, route, 1).bytes
    whole, send = [], []
    port = free_port()
    with floor_server(port, size):
        for _ in range(requests):
            whole.append(measure_latency(created.root, route, 1))
            send.append(measure_latency(f"http://127.0.0.1:{port}", "/", 1))
    return _joined(route, whole), _joined(send_route(route), send)


def _joined(route: str, one_each: list[Latency]) -> Latency:
    times = [latency.median_ms for latency in one_each]
    return Latency(route, percentile(times, 50), percentile(times, 99), max(times), one_each[-1].bytes)
