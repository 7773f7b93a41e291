"""Workloads 2 (metric ingestion), 3 (scale) and 5 (resume) as report sections."""

from __future__ import annotations

from bench import baseline
from bench.ingest import run_ingest
from bench.report import Section, target
from bench.rest import Latency
from bench.resume import run_resume
from bench.scale import LIST_ROUTES, ScaleSpec, run_scale, send_route
from bench.stats import Figure, figures
from bench.suite import Context


def ingest(ctx: Context) -> list[Section]:
    count = ctx.plan.ingest_count
    ours = figures(
        [_logged(ctx, "trialfleet", run_ingest(ctx.tf, ctx.workdir, count)) for _ in range(ctx.plan.reps)]
    )
    if ctx.nni:
        theirs = figures(
            [_logged(ctx, "nni", run_ingest(ctx.nni, ctx.workdir, count)) for _ in range(ctx.plan.nni_reps)]
        )
    else:
        theirs = baseline.INGEST if count == 10_000 else {}
    section = ctx.section(
        f"2. Metric ingestion: one trial, {count:,} intermediate results as fast as it can, then a final"
    )
    rate = ours.get("end_to_end_metrics_per_s")
    lost = ours.get("lost")
    add = section.add
    add("trial's own reporting loop (s)", ours.get("trial_report_loop_s"), theirs.get("trial_report_loop_s"))
    add("reports per second in the trial", ours.get("trial_reports_per_s"), theirs.get("trial_reports_per_s"))
    add(
        "last report → final result visible on `/metric-data-latest` (s)",
        ours.get("last_report_to_final_visible_s"),
        theirs.get("last_report_to_final_visible_s"),
    )
    add(
        "last report → all visible on `/metric-data` (s)",
        ours.get("last_report_to_all_visible_s"),
        theirs.get("last_report_to_all_visible_s"),
    )
    add(
        "**end to end: metrics/s** (first report → all visible)",
        rate,
        theirs.get("end_to_end_metrics_per_s"),
        "",
        target(rate.median > 20_000 and lost.median == 0 if rate and lost else None, "> 20,000/s, none lost"),
    )
    add("lost", lost, theirs.get("lost"))
    add("duplicated", ours.get("duplicated"), theirs.get("duplicated"))
    add("reordered (in the REST response)", ours.get("reordered"), theirs.get("reordered"))
    add("intermediate / final received", ours.get("periodical_received"), None)
    add("manager RSS, max (MiB)", ours.get("manager_rss_max_mib"), theirs.get("manager_rss_max_mib"))
    add("manager CPU for the run (s)", ours.get("manager_cpu_s"), theirs.get("manager_cpu_s"))
    section.notes.append(
        "Once the trial has reported everything (its timing record exists), `/metric-data-latest` is polled every "
        "20 ms until the final result shows, then `/metric-data` until one response holds every result: 'all "
        "visible' is the end of that response. Nothing is polled while the trial reports (NNI's baseline polled "
        "the whole list every 0.5 s throughout)."
    )
    return [section]


def _logged(ctx: Context, name: str, run: dict[str, float]) -> dict[str, float]:
    ctx.log(
        f"  {name} ingest: {run.get('end_to_end_metrics_per_s', float('nan')):.0f} metrics/s, lost {run['lost']:.0f}"
    )
    return run


#: issue 17, at 10,000 trials: the whole run at 40 trials/s or more, the manager under 100 MiB
SCALE_RATE_TARGET = 40
SCALE_RSS_TARGET_MIB = 100


def scale(ctx: Context) -> list[Section]:
    sections = []
    for size in ctx.plan.scale_sizes:
        spec = ScaleSpec(
            size, requests=ctx.plan.scale_requests, list_requests=max(ctx.plan.scale_requests // 10, 5)
        )
        figs, running, idle = run_scale(ctx.tf, ctx.workdir, spec)
        ctx.log(f"  scale {size}: rss {figs['manager_rss_max_mib']:.1f} MiB, wall {figs['wall_s']:.0f} s")
        theirs = baseline.SCALE_1000 if size == 1_000 and not ctx.nni else {}
        section = ctx.section(
            f"3. Scale: {size:,} short trials, concurrency 8 (3 intermediate results + 1 final each)"
        )
        one = {k: Figure.of([v]) for k, v in figs.items()}
        rss = one["manager_rss_max_mib"]
        section.add("trials finished", one["trials_finished"])
        section.add("wall, `create` → all done (s)", one["wall_s"])
        rate = Figure.of([size / figs["wall_s"]])
        section.add(
            "throughput, `create` → all done (trials/s)",
            rate,
            None,
            "",
            target(rate.median >= SCALE_RATE_TARGET, f"≥ {SCALE_RATE_TARGET}/s") if size >= 10_000 else "",
        )
        section.add(
            "manager RSS, max (MiB)",
            rss,
            theirs.get("manager_rss_end_mib"),
            "",
            target(rss.median < SCALE_RSS_TARGET_MIB, f"< {SCALE_RSS_TARGET_MIB} MiB")
            if size >= 10_000
            else "",
        )
        section.add(
            "manager RSS at the end (MiB)", one["manager_rss_end_mib"], theirs.get("manager_rss_end_mib")
        )
        section.add(
            "manager CPU per trial (ms)",
            one["manager_cpu_ms_per_trial"],
            theirs.get("manager_cpu_ms_per_trial"),
        )
        section.add("database size (MiB)", one["db_mib"])
        for probe, label in ((idle, "idle"), (running, "while running")):
            worst = max((lat for lat in probe if _ui_route(lat.route)), key=lambda lat: lat.p99_ms)
            met = target(worst.p99_ms < 50, "< 50 ms") if size >= 10_000 else ""
            section.add(
                f"worst p99 of the web UI's routes, {label} (ms): `{worst.route}`",
                Figure.of([worst.p99_ms]),
                None,
                "",
                met,
            )
        section.notes.append(
            f"One run; REST figures are over {spec.requests} sequential GETs per route ({spec.list_requests} for NNI's whole lists), each on a new connection."
        )
        if theirs:
            section.notes.append(
                "NNI's figures: its 1,000-light-trial runs (node manager + dispatcher); NNI was not measured at 10,000 trials."
            )
        for route in LIST_ROUTES:
            ratios = [_send_ratio(probe, route) for probe in (idle, running)]
            section.add(
                f"`{route}` median / time to send its bytes, idle / while running",
                Figure.of([max(ratios)]),
                None,
                "",
                target(max(ratios) <= 2, "≤ 2 times") if size >= 10_000 else "",
            )
        section.notes.append(
            "Time to send a whole list's bytes: the same client asking a server that only answers with a body of "
            "that size (`bench/floor_server.py`), its requests in turns with the list's, beside the same trials. The "
            "figure above is the larger of the two ratios (idle: "
            + ", ".join(f"{_send_ratio(idle, r):.2f}" for r in LIST_ROUTES)
            + "; while running: "
            + ", ".join(f"{_send_ratio(running, r):.2f}" for r in LIST_ROUTES)
            + ")."
        )
        section.notes.append(latency_table(running, idle, size, ctx))
        sections.append(section)
    return sections


def _ui_route(route: str) -> bool:
    return route not in LIST_ROUTES and route not in {send_route(r) for r in LIST_ROUTES}


def _send_ratio(probe: list[Latency], route: str) -> float:
    found = {latency.route: latency for latency in probe}
    return found[route].median_ms / found[send_route(route)].median_ms


def latency_table(running: list[Latency], idle: list[Latency], size: int, ctx: Context) -> str:
    lines = [
        f"REST latency at {size:,} trials (ms; running = probed when half had finished):\n",
        "| route | idle median | idle p99 | running median | running p99 | body bytes | NNI idle median / p99 | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for live, rest in zip(running, idle, strict=True):
        nni = baseline.SCALE_1000_LATENCY.get(rest.route) if size == 1_000 and not ctx.nni else None
        nni_cell = f"{nni[0].median:.1f} / {nni[1].median:.1f}" if nni else "-"
        ui = _ui_route(rest.route)
        mark = target(max(live.p99_ms, rest.p99_ms) < 50, "p99 < 50 ms") if ui and size >= 10_000 else ""
        lines.append(
            f"| `{rest.route}` | {rest.median_ms:.1f} | {rest.p99_ms:.1f} | {live.median_ms:.1f} | {live.p99_ms:.1f} "
            f"| {rest.bytes:,} | {nni_cell} | {mark} |"
        )
    return "\n".join(lines) + "\n"


def resume(ctx: Context) -> list[Section]:
    trials = ctx.plan.resume_trials
    runs = []
    for rep in range(ctx.plan.reps):
        run = run_resume(ctx.tf, ctx.workdir, trials)
        ctx.log(
            f"  resume rep {rep}: all adopted {run['resume_to_all_adopted_s']:.2f}s, re-run {run['re_run']:.0f}"
        )
        runs.append(run)
    ours = figures(runs)
    section = ctx.section(f"5. Resume after `kill -9` of the manager: {trials} running trials", nni=False)
    section.add("`resume` command itself (s)", ours.get("resume_cmd_s"))
    section.add(
        "**`resume` → all trials RUNNING with an ADOPTED event (s)**", ours.get("resume_to_all_adopted_s")
    )
    section.add("trials adopted", ours.get("adopted"))
    section.add("trials started a second time", ours.get("re_run"))
    section.add("trials given another attempt", ours.get("extra_attempts"))
    section.notes.append(baseline.RESUME_NOTE)
    return [section]
