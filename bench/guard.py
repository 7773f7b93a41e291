"""``python -m bench.guard``: a few-minute smoke of the suite's figures, each as a ratio to a floor of this
machine measured in the same run, checked against ``bench/guard_reference.json``.

A figure whose ratio is more than twice its reference in two runs in a row fails the guard (exit 1): a
regression, not a slow machine, since the floors slow down with the machine (the second run is made only when
the first has a figure over). ``--record`` measures the ratios ``--reps`` times and
writes their medians as the new reference; run it on a quiet machine, on purpose, and commit the file.

Every figure is "lower is better":

- time per trial at concurrency 2 over the bare trial's own runtime (workload 1, `import nni` trials);
- `create` → first trial RUNNING over an empty Python's start;
- REST under load (50 clients every 0.5 s during a run at concurrency 8), median and p99, over those of a
  server that only answers (``bench/floor_server.py``) polled the same way beside the same trials;
- the bare server's requests/s without pause over trialfleet's (saturation);
- keep-alive ``/version`` latency over the bare server's;
- the web UI's worst route p99 at 200 trials, idle, over the bare server's single-request latency;
- NNI's whole lists at 200 trials while trials run, the slower median over the time to send its bytes (asked
  in turns with the list, so that both share the trials' load);
- the wall time of 200 trials at concurrency 8 over what the bare trials need on the machine's cores;
- the time per metric ingested (2,000 intermediate results) over an empty Python's start;
- `stop` → every process gone, with 8 running trials, over an empty Python's start;
- on 3 SSH hosts (network namespaces, as workload 4), the gap between a trial's end and the next start at
  concurrency 8 over the same gap of an SSH session and a keeper per trial and nothing else, on the same hosts
  (``bench.remote.bare_ssh_run``). A machine where the hosts cannot be built fails the guard, saying why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import machine
from bench.floor_server import floor_server
from bench.ingest import run_ingest
from bench.launch import SCRIPTS, LaunchSpec, run_launch
from bench.remote import BARE_SSH, run_remote
from bench.rest import NNI_API, PollingClients, measure_latency, wait_for
from bench.scale import LIST_ROUTES, ScaleSpec, run_scale, send_route
from bench.scale import TF as TF_API
from bench.stats import percentile
from bench.stop import run_stop
from bench.systems import System, free_port, trialfleet

REFERENCE = Path(__file__).resolve().parent / "guard_reference.json"
ALLOWED = 2.0  # a ratio up to twice its reference passes
REMOTE_GAP = "remote gap at concurrency 8 / an SSH session and a keeper per trial"


def measure(system: System, workdir: Path, log: Callable[[str], None]) -> dict[str, float]:
    """Every guarded figure, as a ratio to its floor."""
    python_start = machine.time_command([sys.executable, "-c", "pass"], 7).median
    ratios: dict[str, float] = {}

    bare = machine.bare_trial(system, SCRIPTS[("trialfleet", "nni")], 5).median
    launch = run_launch(system, workdir, LaunchSpec("nni", 40, 2), bare)
    ratios["time per trial, concurrency 2 / bare trial"] = launch["slot_s"] / bare
    ratios["create → first RUNNING / python start"] = launch["first_running_s"] / python_start
    log(f"  launch: slot {launch['slot_s']:.3f} s, bare trial {bare:.3f} s")

    load_spec = LaunchSpec("sdk", 100, 8, load_clients=50, saturation_clients=8)
    sdk_bare = machine.bare_trial(system, SCRIPTS[("trialfleet", "sdk")], 3).median
    ours = run_launch(system, workdir, load_spec, sdk_bare)
    floor = run_launch(system, workdir, dataclasses.replace(load_spec, floor=True), sdk_bare)
    ratios["REST under load, median / bare server"] = ours["load_median_ms"] / floor["load_median_ms"]
    ratios["REST under load, p99 / bare server"] = ours["load_p99_ms"] / floor["load_p99_ms"]
    ratios["saturation: bare server's requests/s / ours"] = (
        floor["saturation_requests_per_s"] / ours["saturation_requests_per_s"]
    )
    log(
        f"  load: median {ours['load_median_ms']:.1f} ms (bare {floor['load_median_ms']:.1f}), "
        f"p99 {ours['load_p99_ms']:.1f} ms (bare {floor['load_p99_ms']:.1f}), "
        f"saturation {ours['saturation_requests_per_s']:,.0f}/s (bare {floor['saturation_requests_per_s']:,.0f})"
    )

    figures, running, idle = run_scale(system, workdir, ScaleSpec(200, requests=30, list_requests=20))
    port = free_port()
    with floor_server(port, 2000):
        single = measure_latency(f"http://127.0.0.1:{port}", "/", 50).p99_ms
        version = _keep_alive_median(port, "/")
    worst = max(latency.p99_ms for latency in idle if latency.route.startswith(TF_API))
    ratios["web UI routes at 200 trials, worst idle p99 / bare server"] = worst / single
    medians = {latency.route: latency.median_ms for latency in running}
    lists = max(medians[route] / medians[send_route(route)] for route in LIST_ROUTES)
    ratios["NNI's whole lists at 200 trials while running, median / time to send"] = lists
    ratios["200 trials at concurrency 8, wall / bare trials on the cores"] = figures["wall_s"] / (
        200 * sdk_bare / (os.cpu_count() or 1)
    )
    log(
        f"  scale: wall {figures['wall_s']:.1f} s, worst idle p99 {worst:.1f} ms (bare {single:.1f}), "
        f"whole lists while running {lists:.2f} times the time to send them"
    )

    config = system.write_experiment(
        workdir / f"guard-keep-alive-{time.time_ns()}", "trial_sdk.py", trials=1, concurrency=1
    )
    created = system.create(config)
    try:
        wait_for(created.base, "/check-status", lambda body: body.get("status") == "DONE", 120, poll=0.1)
        keep_alive = _keep_alive_median(created.port, f"{NNI_API}/version")
    finally:
        system.stop(created.experiment_id)
    ratios["keep-alive /version / bare server"] = keep_alive / version
    log(f"  keep-alive /version: {keep_alive:.2f} ms (bare {version:.2f})")

    ingest = run_ingest(system, workdir, 2000)
    per_metric = 1 / ingest["end_to_end_metrics_per_s"]
    ratios["time per metric ingested / python start"] = per_metric / python_start
    log(f"  ingest: {ingest['end_to_end_metrics_per_s']:,.0f} metrics/s")

    stop = run_stop(system, workdir)
    ratios["stop → all gone / python start"] = stop["stop_to_all_gone_s"] / python_start
    log(f"  stop: {stop['stop_to_all_gone_s']:.2f} s, python start {python_start * 1000:.1f} ms")

    remote, why = run_remote(system, workdir, LaunchSpec("nni", 40, 8), 1, floor=True)
    if why is None:
        gap, floor_gap = remote[""][0]["gap_median_s"], remote[BARE_SSH][0]["gap_median_s"]
        ratios[REMOTE_GAP] = gap / floor_gap
        log(
            f"  remote: gap {gap * 1000:.0f} ms at concurrency 8 (a session and a keeper alone: {floor_gap * 1000:.0f})"
        )
    else:
        log(f"  remote: NOT MEASURED: {why}")
    return ratios


def _best(*ratios: float | None) -> float:
    return min((r for r in ratios if r is not None and not math.isnan(r)), default=math.nan)


def _keep_alive_median(port: int, route: str, seconds: float = 1.0) -> float:
    """The median latency of one client asking without pause on one kept-alive connection."""
    clients = PollingClients("127.0.0.1", port, [route], clients=1, interval=0, max_requests=10**6)
    with clients:
        time.sleep(seconds)
    return percentile(clients.latencies_ms, 50)


def check(ratios: dict[str, float], reference: dict[str, float]) -> list[str]:
    """The figures over ``ALLOWED`` times their reference (or not measured)."""
    failed = []
    for name, limit in reference.items():
        ratio = ratios.get(name, math.nan)
        if not ratio <= ALLOWED * limit:  # NaN (not measured) fails too
            failed.append(name)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.guard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="write the medians as the new reference")
    parser.add_argument("--reps", type=int, default=3, help="repetitions with --record (default 3)")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    args = parser.parse_args(argv)
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="trialfleet-guard-") as tmp:
        system = trialfleet(Path(tmp) / "home")

        def run() -> dict[str, float]:
            print(f"guard run {len(runs) + 1}", flush=True)
            runs.append(measure(system, Path(tmp) / f"run{len(runs)}", lambda line: print(line, flush=True)))
            return runs[-1]

        if args.record:
            for _ in range(args.reps):
                run()
            ratios = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
        else:
            reference: dict[str, float] = json.loads(args.reference.read_text())["ratios"]
            ratios = run()
            if check(ratios, reference):  # a figure is noisy on a busy machine: it fails if it fails twice
                again = run()
                ratios = {name: _best(ratios.get(name), again.get(name)) for name in reference}
    if args.record:
        described = machine.describe()
        args.reference.write_text(
            json.dumps(
                {
                    "taken": time.strftime("%Y-%m-%d %H:%M %Z"),
                    "machine": f"{described['cpu']}, {described['cores']} cores",
                    "runs": len(runs),
                    "ratios": {name: float(f"{value:.4g}") for name, value in ratios.items()},
                },
                indent=2,
                ensure_ascii=False,
            )
            + "\n"
        )
        print(f"reference written: {args.reference}")
        return 0
    failed = check(ratios, reference)
    width = max(map(len, reference))
    print(f"{'figure':<{width}}  {'ratio':>8}  {'reference':>9}  {'x ref':>6}")
    for name, limit in reference.items():
        ratio = ratios.get(name, math.nan)
        mark = "  REGRESSED" if name in failed else ""
        print(f"{name:<{width}}  {ratio:8.4g}  {limit:9.4g}  {ratio / limit:6.2f}{mark}")
    if failed:
        print(f"{len(failed)} figure(s) over {ALLOWED:g}x their reference: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
