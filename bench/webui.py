"""``python -m bench.webui``: the web UI at 10,000 running trials, in headless Chromium, against issue 18's
figures ("before"). Writes ``bench/WEBUI.md`` (``--results -`` for none) and prints it.

The experiment is the one of tests/browser/test_ten_thousand_running.py: a real manager process serving
10,000 simulated trials (trialfleet.testing.simulated), each reporting an intermediate result every 30 s.
Figures are measured, never asserted:

* a first visit, cold (a new browser context: nothing cached) of the Overview and the Charts page: navigation
  → the first chart drawn with data, and → every chart; the longest main-thread task meanwhile;
* first paint: navigation → first contentful paint, and → the page's content (overview cards, the first
  table row, all four charts drawn with their data);
* redraws: each chart drawing on the charts page over a live minute (the page's "draw <chart>" user-timing
  measures), and the longest main-thread task (PerformanceObserver "longtask") meanwhile; how long the charts
  lag REST after 200 trials end at once;
* liveness: REST shows a trial's new status → its row shows it, over 48 status changes; and → the overview's
  count of succeeded trials shows it, over 16 trials ending one at a time;
* memory: JS heap (after a forced GC) and DOM nodes after the first charts visit and after 20 page switches;
* brushing: the parallel coordinates with 10,000 lines, each mouse move to its painted frame (bench.webui_brush).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import webui_brush
from trialfleet.testing.webui_scale import (
    RunningExperiment,
    measure_liveness,
    percentile,
    running_experiment,
    wait_js,
    watch_rest,
)

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]
RESULTS = Path(__file__).resolve().parent / "WEBUI.md"

#: issue 18's measurements of the web UI before this work (same machine, under load)
BEFORE = {
    "charts_first_draw": "92-95 s (16-20 s idle)",
    "overview_chart": "33-43 s (6-7 s idle)",
    "longest_task": "20-34 s",
    "chart_lag": "up to 1,367 trials behind, still behind a minute after the end",
    "liveness": "p50 1.50 s / p99 3.29 s",
    "leak": "+2,100 DOM nodes and +1.5 MB heap per charts round trip; WebGL contexts lost after 5",
}

CONTENT = {
    "overview": "() => document.querySelector('#trial-total') && document.querySelector('#best-trials, #best-trials-empty, .card .empty')",
    "trials": "() => document.querySelector('#trials-table tbody tr[data-trial]')",
    "charts": (
        "() => ['chart-metric', 'chart-parallel', 'chart-duration', 'chart-intermediate']"
        ".every((id) => document.getElementById(id)?.data?.length)"
    ),
    "experiments": "() => document.querySelector('#experiments-table tbody tr[data-experiment]')",
}

WATCH_TASKS = """() => {
  window.__tasks = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__tasks.push(e.duration); })
    .observe({ type: 'longtask', buffered: false });
  window.__redraws = [];  // [chart id, ms]: the page measures each drawing as "draw <chart id>"
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.name.startsWith('draw ')) window.__redraws.push([e.name.slice(5), e.duration]);
  }).observe({ type: 'measure', buffered: false });
}"""


#: stamps the first moment the overview's SUCCEEDED count shows each number: window.__counts["9"]
WATCH_COUNTS = """() => {
  window.__counts = {};
  const stamp = () => {
    const text = document.querySelector("#status-counts a[data-status='SUCCEEDED'] .count")?.textContent;
    if (text && !(text in window.__counts)) window.__counts[text] = Date.now();
  };
  stamp();
  new MutationObserver(stamp).observe(document.getElementById('page'), { childList: true, subtree: true, characterData: true });
}"""


def overview_liveness(page: Any, running: RunningExperiment, trial_ids: list[str]) -> list[float]:
    """End each trial in turn while the overview is shown: seconds from REST showing it ended to the
    overview's SUCCEEDED count showing one more."""
    page.locator("nav a[data-page=overview]").click()
    wait_js(page, "() => document.querySelector(\"#status-counts a[data-status='SUCCEEDED'] .count\")")
    page.evaluate(WATCH_COUNTS)
    delays = []
    for trial_id in trial_ids:
        succeeded = running.get("/api/v1/trialfleet/experiment")["counts"].get("SUCCEEDED", 0)
        wait_js(page, "n => window.__counts[String(n)]", succeeded)
        rest: dict[str, Any] = {}
        thread = watch_rest(running, trial_id, "RUNNING", rest)
        running.end(trial_id, "SUCCEEDED", 0.5)
        thread.join()
        shown = wait_js(page, "n => window.__counts[String(n)]", succeeded + 1) / 1000
        delays.append(max(0.0, shown - rest[trial_id]))
    return delays


#: installed before the page's own scripts: every main-thread task over 50 ms from navigation on
LONG_TASKS_FROM_START = """window.__tasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__tasks.push(e.duration); })
  .observe({ type: 'longtask', buffered: true });"""

#: the first chart of each page with charts, drawn with data
FIRST_CHART = {
    "overview": "() => document.getElementById('overview-metric-plot')?.data?.length",
    "charts": "() => document.getElementById('chart-metric')?.data?.length",
}


def cold_visit(browser: Any, url: str, name: str) -> dict[str, float]:
    """A first visit with nothing cached (a new browser context: no HTTP or code cache): seconds from navigation
    to the page's first chart drawn with data and to its content (every chart), the longest main-thread task
    meanwhile (ms), and the bytes of plotly.js received (none since the Overview's and the Charts page's charts
    are drawn without it)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(300_000)
    page.add_init_script(LONG_TASKS_FROM_START)
    sizes: list[int] = []
    page.on(
        "response",
        lambda r: sizes.append(int(r.headers.get("content-length") or 0)) if "plotly" in r.url else None,
    )
    started = time.monotonic()
    page.goto(f"{url}/#/{name}")
    wait_js(page, FIRST_CHART[name], timeout=300)
    first = time.monotonic() - started
    wait_js(page, CONTENT[name], timeout=300)
    content = time.monotonic() - started
    time.sleep(0.2)  # a task still running when the content showed is reported when it ends
    tasks = page.evaluate("() => window.__tasks")
    context.close()
    return {
        "first_chart_s": first,
        "content_s": content,
        "longest_task_ms": max(tasks, default=0.0),
        "tasks_over_50ms": len(tasks),
        "plotly_kib": sum(sizes) / 1024,
    }


def first_paint(page: Any, url: str, name: str) -> tuple[float, float]:
    """(first contentful paint, content shown) in seconds after a fresh navigation to the page."""
    page.goto("about:blank")
    started = time.monotonic()
    page.goto(f"{url}/#/{name}")
    wait_js(page, CONTENT[name], timeout=300)
    content = time.monotonic() - started
    fcp = page.evaluate("() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null")
    return (fcp or 0) / 1000, content


def heap(session: Any) -> tuple[float, int]:
    session.send("HeapProfiler.collectGarbage")
    used = session.send("Runtime.getHeapUsage")["usedSize"] / 2**20
    nodes = session.send("Memory.getDOMCounters")["nodes"]
    return used, int(nodes)


def end_some(running: RunningExperiment) -> None:
    """50 trials end, so that every chart has data to draw."""
    for i in range(50):
        running.end(f"s{running.trials - 2000 - i:05d}", "SUCCEEDED", round(0.3 + i / 500, 4))
    while running.get("/api/v1/trialfleet/trials?status=SUCCEEDED&limit=1")["total"] < 50:
        time.sleep(0.1)


def measure(running: RunningExperiment, live_seconds: float) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    figures: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(300_000)
        end_some(running)
        figures["cold"] = {name: cold_visit(browser, running.url, name) for name in FIRST_CHART}
        page.goto(f"{running.url}/#/charts")  # warms the HTTP cache: plotly's immutable URL
        wait_js(page, CONTENT["charts"], timeout=300)
        page.evaluate(WATCH_TASKS)
        ended = [f"s{running.trials - 1000 - i:05d}" for i in range(200)]
        for i, trial_id in enumerate(ended):
            running.end(trial_id, "SUCCEEDED", round(0.2 + i / 1000, 4))
        lag_start = time.monotonic()
        while running.get("/api/v1/trialfleet/trials?status=SUCCEEDED&limit=1")["total"] < 50 + len(ended):
            time.sleep(0.05)
        wait_js(
            page,
            "n => document.getElementById('chart-metric').data[0].x.length >= n",
            50 + len(ended),
            timeout=300,
        )
        figures["chart_lag"] = time.monotonic() - lag_start
        time.sleep(live_seconds)
        figures["redraws"] = page.evaluate("() => window.__redraws")
        figures["tasks"] = page.evaluate("() => window.__tasks")

        figures["paint"] = {name: first_paint(page, running.url, name) for name in CONTENT}
        page.goto("about:blank")
        started = time.monotonic()
        page.goto(f"{running.url}/#/overview")
        wait_js(page, "() => document.getElementById('overview-metric-plot')?.data?.length", timeout=300)
        figures["overview_chart"] = time.monotonic() - started

        session = page.context.new_cdp_session(page)
        figures["heap_before"] = heap(session)
        for _ in range(5):
            for name in ("overview", "trials", "charts", "experiments"):
                page.locator(f"nav a[data-page={name}]").click()
                wait_js(page, CONTENT[name], timeout=300)
        figures["heap_after"] = heap(session)
        page.goto(f"{running.url}/#/experiments")
        figures["brushing"] = webui_brush.measure(page, f"{running.url}/webui/js/parcoords.js")

        page.locator("nav a[data-page=trials]").click()
        wait_js(page, CONTENT["trials"], timeout=300)
        page.locator(".pager select").select_option("50")
        wait_js(
            page,
            "() => document.querySelectorAll('#trials-table tbody tr[data-trial]').length === 50",
            timeout=300,
        )
        newest = [f"s{running.trials - 1 - i:05d}" for i in range(48)]
        figures["liveness"] = measure_liveness(
            page, running, newest[:32], lambda t: running.end(t, "SUCCEEDED", 0.5)
        ) + measure_liveness(page, running, newest[32:], running.kill)
        figures["overview_liveness"] = overview_liveness(
            page, running, [f"s{running.trials - 100 - i:05d}" for i in range(16)]
        )
        browser.close()
    return figures


def over_50(ms: float) -> str:
    """A longest task as the long-task observer sees it: only tasks over 50 ms are reported."""
    return f"{ms:.0f} ms" if ms else "none over 50 ms"


def report(figures: dict[str, Any], trials: int, load: tuple[float, float, float]) -> str:
    redraws = [ms for _, ms in figures["redraws"]] or [0.0]
    per_chart: dict[str, list[float]] = {}
    for chart, ms in figures["redraws"]:
        per_chart.setdefault(chart, []).append(ms)
    tasks = figures["tasks"] or [0.0]
    live = figures["liveness"]
    (heap0, nodes0), (heap1, nodes1) = figures["heap_before"], figures["heap_after"]
    lines = [
        "# Web UI at 10,000 running trials",
        "",
        f"`python -m bench.webui` on {platform.node()} ({os.cpu_count()} cores, load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start), {trials:,} simulated trials running through the "
        "real manager, store and REST server, each reporting an intermediate result every 30 s (~330 metrics/s); "
        'headless Chromium at 1440x900. "Before" is issue 18\'s figures, taken on this machine under load.',
        "",
        "| figure | before | now | ratio |",
        "|---|---|---|---|",
    ]
    charts_paint = figures["paint"]["charts"][1]
    lines += [
        f"| charts page: navigation → all four charts drawn | {BEFORE['charts_first_draw']} | {charts_paint:.2f} s | "
        f"{92 / charts_paint:.0f}x |",
        f"| overview: navigation → metric chart drawn | {BEFORE['overview_chart']} | {figures['overview_chart']:.2f} s | "
        f"{33 / figures['overview_chart']:.0f}x |",
        f"| longest main-thread task on the live charts page | {BEFORE['longest_task']} | "
        + (f"{max(tasks) / 1000:.3f} s | {20_000 / max(tasks):.0f}x |" if figures["tasks"] else "none over 50 ms | |"),
        f"| charts behind REST after 200 trials end at once | {BEFORE['chart_lag']} | caught up {figures['chart_lag']:.2f} s after REST | |",
        f"| liveness (REST → trials table), {len(live)} changes | {BEFORE['liveness']} | p50 {percentile(live, 0.5):.2f} s / "
        f"p99 {percentile(live, 0.99):.2f} s | {1.50 / max(percentile(live, 0.5), 0.01):.0f}x / "
        f"{3.29 / max(percentile(live, 0.99), 0.01):.0f}x |",
        f"| liveness (REST → overview's counts), {len(figures['overview_liveness'])} trials ending | not measured | "
        f"p50 {percentile(figures['overview_liveness'], 0.5):.2f} s / "
        f"p99 {percentile(figures['overview_liveness'], 0.99):.2f} s | |",
        f"| memory after 20 page switches | {BEFORE['leak']} | heap {heap0:.1f} → {heap1:.1f} MB, DOM nodes "
        f"{nodes0:,} → {nodes1:,} | |",
        "",
        "First visit, cold (a new browser context: nothing in the HTTP or code cache), navigation →:",
        "",
        "| page | first chart drawn | every chart drawn | longest main-thread task | tasks over 50 ms | plotly.js received |",
        "|---|---|---|---|---|---|",
        *(
            f"| {name} | {c['first_chart_s']:.2f} s | {c['content_s']:.2f} s | {over_50(c['longest_task_ms'])} | "
            f"{c['tasks_over_50ms']} | {c['plotly_kib']:,.0f} KiB |"
            for name, c in figures["cold"].items()
        ),
        "",
        "First paint of each page (fresh navigation, HTTP cache warm):",
        "",
        "| page | first contentful paint | content shown |",
        "|---|---|---|",
    ]
    for name, (fcp, content) in figures["paint"].items():
        lines.append(f"| {name} | {fcp:.2f} s | {content:.2f} s |")
    lines += [
        "",
        f"Redraws on the live charts page: {len(redraws)} drawings, median {statistics.median(redraws):.0f} ms, "
        f"max {max(redraws):.0f} ms; {len(figures['tasks'])} tasks over 50 ms"
        + (f", longest {max(tasks):.0f} ms." if figures["tasks"] else "."),
        "",
        "| chart | drawings | median (ms) | max (ms) |",
        "|---|---|---|---|",
    ]
    for chart, values in sorted(per_chart.items()):
        lines.append(f"| {chart} | {len(values)} | {statistics.median(values):.0f} | {max(values):.0f} |")
    lines += ["", *webui_brush.report(figures["brushing"]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webui", description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--live-seconds", type=float, default=60.0, help="how long redraws are watched")
    parser.add_argument("--results", default=str(RESULTS), help="markdown file to write ('-' for none)")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    with (
        tempfile.TemporaryDirectory(prefix="bench-webui-") as work,
        running_experiment(Path(work), args.trials, metric_interval=30.0) as running,
    ):
        figures = measure(running, args.live_seconds)
    text = report(figures, args.trials, load)
    print(text)
    if args.results != "-":
        Path(args.results).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
