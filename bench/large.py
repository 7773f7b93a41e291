"""Workload 9, one experiment of 100,000 trials (and 1,000 / 10,000 to compare): what a user and the web UI
wait for, and what every poll costs, as the number of trials grows.

The manager side runs on the simulated platform (trialfleet.testing.simulated): a real manager process,
store, REST server and web UI, with trials that run no process. The experiment is written first — N trials
through the store's own write methods, in one transaction (each has its parameters, an intermediate and a
final result; all succeeded but the last :data:`RUNNING`, which report an intermediate result every
:data:`METRIC_INTERVAL` seconds, so the database changes while it is measured) — then ``resume`` re-adopts
the running ones. Measured:

* ``trialfleet trial ls`` (the console script, as a user runs it), and ``--all`` once;
* every route the web UI and the scheduler ask on each poll (median and p99 of sequential GETs), and the
  store's ``trial_counts`` itself (the scheduler's status update calls it in the manager);
* NNI's whole lists and ``/trials/all``: the first request, and the first after one trial ended (gzip asked
  for, as browsers do), with the bytes sent;
* the trials page's default first page: its first request, and one sent while a whole list is built;
* the web UI's Overview in headless Chromium: a navigation → its metric chart drawn with data, cold (a new
  browser context: nothing cached; with the longest main-thread task) and warm (plotly.js cached).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.rest import get_json, measure_latency
from bench.stats import percentile

TF = "/api/v1/trialfleet"
NNI = "/api/v1/nni"
RUNNING = 50
METRIC_INTERVAL = 2.0
#: what the web UI (``webui/static/js/api.js``) and NNI's UI ask on every poll, however many trials there are
POLL_ROUTES = (
    f"{TF}/experiment",
    f"{TF}/changes",
    f"{TF}/changes?cursor={{cursor}}",
    f"{NNI}/job-statistics",
    f"{NNI}/check-status",
)
LIST_ROUTES = (f"{NNI}/trial-jobs", f"{NNI}/metric-data", f"{TF}/trials/all")
FIRST_PAGE = f"{TF}/trials?offset=0&limit=20"
OTHER_PAGE = f"{TF}/trials?offset=0&limit=20&sort=sequenceId&order=desc"


@dataclass(frozen=True)
class Served:
    url: str
    experiment_id: str
    experiment_dir: Path
    control: Path
    home: Path
    site: Path
    manager_pid: int

    def end(self, trial_id: str) -> None:
        tmp = self.control / f".{trial_id}.tmp"
        tmp.write_text("SUCCEEDED 0.5")
        tmp.rename(self.control / trial_id)

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(self.site)) if p)
        return {**os.environ, "TRIALFLEET_HOME": str(self.home), "PYTHONPATH": path}


def trial_id(i: int) -> str:
    return f"s{i:06d}"


def populate(experiment_dir: Path, trials: int) -> None:
    """``trials`` trials, written by the store's own methods in one transaction (a commit per write made
    100,000 trials take minutes): all succeeded but the last :data:`RUNNING`, which stay running."""
    from trialfleet.manager.decisions import parameter_record
    from trialfleet.status import TrialStatus
    from trialfleet.storage import ExperimentStore, NewMetric
    from trialfleet.testing.simulated import parameters_of

    store = ExperimentStore.for_experiment_dir(experiment_dir)
    now = time.time() - trials
    conn = store._conn
    conn.execute("BEGIN IMMEDIATE")
    store._transaction = lambda: contextlib.nullcontext(conn)  # type: ignore[method-assign]
    for i in range(trials):
        tid, start = trial_id(i), now + i
        store.add_trial(tid, parameter_record(i, parameters_of(i)), start)
        store.mark_submitted(tid, {"simulated": tid, "start": start}, f"simulated:{tid}", start, running=True)
        value = round(((i * 7919) % 1000) / 1000, 4)
        metrics = [NewMetric(tid, i, "PERIODICAL", 0, str(value / 2), start + 0.5)]
        if i < trials - RUNNING:
            metrics.append(NewMetric(tid, i, "FINAL", 0, str(value), start + 0.9, final_value=value))
        store.add_metrics(metrics, {tid: {"metrics": len(metrics)}})
        if i < trials - RUNNING:
            store.end_trial(tid, TrialStatus.SUCCEEDED, start + 0.9, exit_code=0)
    conn.execute("COMMIT")
    store.close()


@contextlib.contextmanager
def served(work_dir: Path, trials: int) -> Iterator[tuple[Served, dict[str, float]]]:
    """A manager serving an experiment of ``trials`` trials; with the seconds its setup took."""
    from trialfleet.manager.launcher import create_experiment, stop_manager
    from trialfleet.testing import simulated
    from trialfleet.testing.webui_scale import free_port

    site = simulated.plugin_dir(work_dir / "site")
    served_env = {"TRIALFLEET_HOME": str(work_dir / "home")}
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "TRIALFLEET_HOME")}
    os.environ.update(
        served_env, PYTHONPATH=os.pathsep.join(p for p in (saved["PYTHONPATH"], str(site)) if p)
    )
    try:
        config = simulated.experiment_config(work_dir, RUNNING, metric_interval=METRIC_INTERVAL).model_copy(
            update={"max_trial_number": trials}  # every trial is written: the tuner is asked for none
        )
        experiment_id, experiment_dir = create_experiment(config)
        started = time.perf_counter()
        populate(experiment_dir, trials)
        written = time.perf_counter()
        launched = simulated.spawn_manager(experiment_dir, "resume", free_port())
        ready = time.perf_counter()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    setup = {"populate_s": written - started, "resume_ready_s": ready - written}
    try:
        yield (
            Served(
                launched.url,
                experiment_id,
                experiment_dir,
                work_dir / "control",
                work_dir / "home",
                site,
                launched.pid,
            ),
            setup,
        )
    finally:
        if not stop_manager(launched.pid, experiment_dir, timeout=300):
            os.kill(launched.pid, signal.SIGKILL)


def gzip_get(url: str) -> tuple[float, int]:
    """(ms, bytes sent) of one GET that accepts gzip, as a browser's."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as answer:
        size = len(answer.read())
    return (time.perf_counter() - start) * 1000, size


def timed_command(served: Served, *args: str) -> tuple[float, float, int]:
    """(seconds, CPU seconds of the command and the manager it asked, bytes printed) of ``trialfleet <args>``
    run as a user runs it. The CPU time hardly moves with the machine's load, the wall time does."""
    command = [sys.executable, "-c", "from trialfleet.cli.entry import main; main()", *args]
    cpu = _cpu_seconds(served.manager_pid)
    start = time.perf_counter()
    done = subprocess.run(command, env=served.env(), capture_output=True, check=True)
    wall = time.perf_counter() - start
    return wall, _cpu_seconds(served.manager_pid) - cpu, len(done.stdout)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by the process ``pid`` and by this process's waited-for children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (
        children.ru_utime + children.ru_stime + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    )


def trial_ls(served: Served, reps: int = 3) -> dict[str, float]:
    runs = [timed_command(served, "trial", "ls", served.experiment_id) for _ in range(reps)]
    every, _, size = timed_command(served, "trial", "ls", served.experiment_id, "--all")
    return {
        "trial_ls_s": percentile([wall for wall, _, _ in runs], 50),
        "trial_ls CPU, command and manager (s)": percentile([cpu for _, cpu, _ in runs], 50),
        "trial_ls_all_s": every,
        "trial_ls_all_mib": size / 2**20,
    }


def poll_routes(served: Served, requests: int) -> dict[str, float]:
    cursor = get_json(served.url, f"{TF}/changes")["cursor"]
    figures = {}
    for route in POLL_ROUTES:
        latency = measure_latency(served.url, route.format(cursor=cursor), requests)
        figures[f"p50 {route}"], figures[f"p99 {route}"] = latency.median_ms, latency.p99_ms
    return figures


def counts_query_us(served: Served, reps: int = 2000) -> float:
    """The store's ``trial_counts``, as the scheduler's status update calls it (µs, median)."""
    from trialfleet.storage import ExperimentStore

    store = ExperimentStore.for_experiment_dir(served.experiment_dir, readonly=True)
    times = []
    try:
        for _ in range(reps):
            start = time.perf_counter()
            store.trial_counts()
            times.append((time.perf_counter() - start) * 1e6)
    finally:
        store.close()
    return percentile(times, 50)


def first_page_during_build(served: Served) -> dict[str, float]:
    """The default first page of the trials table on its first request (the server's first look at the
    trials), then the whole lists' first requests, each with another page asked while it is built."""
    figures = {"first page, first request (ms)": gzip_get(served.url + FIRST_PAGE)[0]}
    for route in LIST_ROUTES:
        result: dict[str, tuple[float, int]] = {}
        whole = threading.Thread(
            target=lambda r=route, out=result: out.update(whole=gzip_get(served.url + r))
        )
        whole.start()
        time.sleep(0.05)
        page = gzip_get(served.url + OTHER_PAGE + f"&q=&status=&t={time.monotonic_ns()}")[0]
        whole.join()
        figures[f"{route}, first request (ms)"] = result["whole"][0]
        figures[f"a page during {route}'s first build (ms)"] = page
    return figures


def after_a_change(served: Served, trials: int, reps: int = 5) -> dict[str, float]:
    """Each whole list's first request after one trial ended (median of ``reps``), and its gzipped size."""
    times: dict[str, list[float]] = {route: [] for route in LIST_ROUTES}
    sizes: dict[str, int] = {}
    for rep in range(reps):
        ended = trial_id(trials - RUNNING + rep)
        served.end(ended)
        while get_json(served.url, f"{NNI}/trial-jobs/{ended}")["status"] != "SUCCEEDED":
            time.sleep(0.05)
        for route in LIST_ROUTES:
            ms, sizes[route] = gzip_get(served.url + route)
            times[route].append(ms)
    figures = {f"{route} after a change (ms)": percentile(times[route], 50) for route in LIST_ROUTES}
    figures.update({f"{route} gzipped (MiB)": sizes[route] / 2**20 for route in LIST_ROUTES})
    return figures


def overview_first_chart(served: Served, reps: int = 3) -> dict[str, float]:
    """Seconds from a navigation to the Overview to its metric chart drawn with data: cold (nothing cached,
    with the longest main-thread task meanwhile), then warm (plotly.js cached; median of ``reps``)."""
    from playwright.sync_api import sync_playwright

    from bench.webui import ARGS, CHROMIUM, cold_visit
    from trialfleet.testing.webui_scale import wait_js

    chart = "() => document.getElementById('overview-metric-plot')?.data?.length"
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        cold = cold_visit(browser, served.url, "overview")
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{served.url}/#/overview")  # warms the HTTP cache (plotly's immutable URL)
        wait_js(page, chart, timeout=600)
        for _ in range(reps):
            page.goto("about:blank")
            started = time.monotonic()
            page.goto(f"{served.url}/#/overview")
            wait_js(page, chart, timeout=600)
            times.append(time.monotonic() - started)
        browser.close()
    return {
        "overview first chart, cold (s)": cold["first_chart_s"],
        "overview cold: longest main-thread task (ms)": cold["longest_task_ms"],
        "overview first chart (s)": percentile(times, 50),
    }


def run_large(work_dir: Path, trials: int, requests: int = 200) -> dict[str, Any]:
    with served(work_dir, trials) as (experiment, figures):
        figures.update(first_page_during_build(experiment))
        figures.update(poll_routes(experiment, requests))
        figures["trial_counts in the store (µs)"] = counts_query_us(experiment)
        figures.update(trial_ls(experiment))
        figures.update(after_a_change(experiment, trials))
        figures.update(overview_first_chart(experiment))
        return figures


def main() -> None:
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(description="workload 9 alone: one size, its figures as JSON")
    parser.add_argument("--trials", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trialfleet-large-") as work_dir:
        print(json.dumps(run_large(Path(work_dir), args.trials), indent=1))


if __name__ == "__main__":
    main()
