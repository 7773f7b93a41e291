"""Workloads 1 (launch overhead), 4 (the same on SSH hosts), 6 (the same under REST load) and 8 (stop) as report
sections."""

from __future__ import annotations

import dataclasses
import math
import os

from bench import baseline
from bench.launch import FLOOR_BODY_BYTES_PER_TRIAL, SCRIPTS, LaunchSpec
from bench.remote import BARE_SSH, BARE_START, run_remote, run_remote_variants
from bench.report import Section, cell, target
from bench.stats import Figure, figures
from bench.stop import run_stop
from bench.suite import Context, repeat

#: per-trial overhead at one trial per core (issue: 100 `import nni` trials at concurrency 2, crash safety kept)
OVERHEAD_TARGET_S = 0.03


def launch(ctx: Context) -> list[Section]:
    sections = []
    for kind in ("nni", "sdk"):
        for concurrency in (2, 8):
            spec = LaunchSpec(kind, ctx.plan.launch_trials, concurrency)
            ours = repeat(ctx, ctx.tf, spec, SCRIPTS[("trialfleet", kind)], ctx.plan.reps)
            if ctx.nni:
                theirs = figures(repeat(ctx, ctx.nni, spec, SCRIPTS[("nni", kind)], ctx.plan.nni_reps))
            else:
                theirs = baseline.LAUNCH.get((kind, concurrency), {})
            title = (
                f"1. Launch overhead: {spec.trials} trials, concurrency {concurrency}, {_kind_title(kind)}"
            )
            sections.append(
                launch_section(ctx, title, figures(ours), theirs, concurrency, first_target_s=0.5)
            )
    return sections


def _kind_title(kind: str) -> str:
    if kind == "nni":
        return "trial does `import nni` (trialfleet: its shim; NNI: the real package)"
    return "trial on trialfleet's plain SDK (NNI: its stdlib-HTTP light trial, no `import nni`)"


def launch_section(
    ctx: Context,
    title: str,
    ours: dict[str, Figure],
    theirs: dict[str, Figure],
    concurrency: int,
    nni: bool = True,
    first_target_s: float = 1.0,
    gap_target_s: float | None = None,
    gap_floor: str = "",
    first_floor: str = "",
) -> Section:
    section = ctx.section(title, nni=nni)
    # the target is set at one trial per core; beyond, the formula measures CPU oversubscription
    nni_overhead, overhead = theirs.get("overhead_per_trial_s"), ours.get("overhead_per_trial_s")
    overhead_target = None
    if overhead and nni_overhead:
        overhead_target = overhead.median * 20 <= nni_overhead.median and overhead.median <= OVERHEAD_TARGET_S
    one_per_core = concurrency <= (os.cpu_count() or 1)
    overhead_mark = (
        target(overhead_target, f"≤ NNI / 20 and ≤ {OVERHEAD_TARGET_S:g} s") if nni and one_per_core else ""
    )
    first = ours.get("first_running_s")
    add = section.add
    add("wall, `create` → last trial's end (s)", ours.get("wall_s"), theirs.get("wall_s"))
    add("`create` command itself (s)", ours.get("create_cmd_s"), theirs.get("create_cmd_s"))
    add(
        "`create` → first trial RUNNING (s)",
        first,
        theirs.get("first_running_s"),
        first_floor,
        target(first.median < first_target_s if first else None, f"< {first_target_s:g} s"),
    )
    gap = ours.get("gap_median_s")
    add(
        "gap: a trial's end → the next start, median (s)",
        gap,
        theirs.get("gap_median_s"),
        gap_floor,
        target(gap.median < gap_target_s if gap else None, f"< {gap_target_s:g} s") if gap_target_s else "",
    )
    add("gap p90 (s)", ours.get("gap_p90_s"), theirs.get("gap_p90_s"))
    add(
        "trial duration in the manager, median (s)",
        ours.get("trial_duration_median_s"),
        theirs.get("trial_duration_median_s"),
    )
    add(
        "bare trial runtime, run alone (s)",
        ours.get("bare_trial_s"),
        theirs.get("bare_trial_s"),
        ctx.floor("python -c pass"),
    )
    add(
        f"**per-trial overhead** = wall x {concurrency} / N - bare (s)",
        overhead,
        nni_overhead,
        "0 (trial alone)",
        overhead_mark,
    )
    if concurrency > 2:
        add(
            "per-trial overhead per core = wall x 2 / N - bare (s)",
            ours.get("overhead_per_trial_per_core_s"),
            theirs.get("overhead_per_trial_per_core_s"),
        )
    add(
        "throughput, first start → last end (trials/s)",
        ours.get("throughput_per_s"),
        theirs.get("throughput_per_s"),
    )
    add(
        "manager CPU per trial (ms)",
        ours.get("manager_cpu_ms_per_trial"),
        theirs.get("manager_cpu_ms_per_trial"),
    )
    add("manager RSS, max (MiB)", ours.get("manager_rss_max_mib"), theirs.get("manager_rss_max_mib"))
    add("machine CPU busy (%)", ours.get("machine_busy_pct"), theirs.get("machine_busy_pct"))
    add(
        "in trial: spawn → first Python line (s)",
        ours.get("in_trial_spawn_to_python_s"),
        theirs.get("in_trial_spawn_to_python_s"),
        ctx.floor("fork/exec of /bin/true"),
    )
    add(
        "in trial: `get_next_parameter()` (s)",
        ours.get("in_trial_get_parameter_s"),
        theirs.get("in_trial_get_parameter_s"),
    )
    add(
        "in trial: last report → trial end (s)",
        ours.get("in_trial_report_to_end_s"),
        theirs.get("in_trial_report_to_end_s"),
    )
    add("trials SUCCEEDED", ours.get("succeeded"), theirs.get("succeeded"))
    add(
        "trials whose recorded parameters ≠ the ones they ran with",
        ours.get("param_metric_mismatch"),
        theirs.get("param_metric_mismatch"),
    )
    return section


def load(ctx: Context) -> list[Section]:
    """Workload 6: workload 1 at concurrency 8 (plain SDK trial) while 50 clients poll the list routes."""
    spec = LaunchSpec(
        "sdk", ctx.plan.launch_trials, 8, ctx.plan.load_clients, ctx.plan.load_interval, saturation_clients=8
    )
    section = ctx.section(
        f"6. Launching under REST load: {spec.trials} trials, concurrency 8, {spec.load_clients} clients"
    )
    section.notes.append(
        f"Each client polls `/trial-jobs` then `/metric-data` on its own keep-alive connection every "
        f"{spec.load_interval} s (loopback, at most 2,000 requests each). Runs without and with the load alternate."
    )
    section.notes.append(
        f"Saturation: once the trials of a run with load have ended, {spec.saturation_clients} clients poll the same "
        f"two routes without pause for {spec.saturation_s:.0f} s. The clients are coroutines on one event loop in "
        "the bench process (raw HTTP/1.1 on keep-alive connections), so a client's own cost per request stays "
        "well under a millisecond."
    )
    section.notes.append(
        "Bare floor: in a third run of each repetition the same clients poll a server that does nothing but "
        "answer (`bench/floor_server.py`: one asyncio loop in a session of its own, as a manager is, a "
        f"{FLOOR_BODY_BYTES_PER_TRIAL * spec.trials:,}-byte body) while trialfleet runs the same trials; its "
        "latency is what the machine allows beside them."
    )
    systems = [ctx.tf, *([ctx.nni] if ctx.nni else [])]
    results: dict[str, tuple[dict[str, Figure], dict[str, Figure]]] = {}
    floor_runs: list[dict[str, float]] = []
    for system in systems:
        script = SCRIPTS[(system.name, "sdk")]
        without: list[dict[str, float]] = []
        with_: list[dict[str, float]] = []
        for _ in range(
            ctx.plan.reps if system is ctx.tf else ctx.plan.nni_reps
        ):  # alternated: the load drifts
            without += repeat(
                ctx, system, dataclasses.replace(spec, load_clients=0, saturation_clients=0), script, 1
            )
            with_ += repeat(ctx, system, spec, script, 1)
            if system is ctx.tf:
                floor_runs += repeat(ctx, system, dataclasses.replace(spec, floor=True), script, 1)
        results[system.name] = (figures(without), figures(with_))
    ours_without, ours_with = results["trialfleet"]
    theirs_without, theirs_with = results.get("nni", ({}, {}))
    floor = figures(floor_runs)
    offered = spec.load_clients * 2 / spec.load_interval

    def bare(key: str) -> str:
        return f"bare server: {cell(floor[key])}" if key in floor else ""

    def below(key: str, limit: float) -> bool | None:
        return ours_with[key].median < limit if key in ours_with else None

    for key, label in (
        ("wall_s", "wall, `create` → last trial's end (s)"),
        ("gap_median_s", "gap: end → next start, median (s)"),
        ("throughput_per_s", "throughput (trials/s)"),
        ("overhead_per_trial_per_core_s", "per-trial overhead per core (s)"),
        ("first_running_s", "`create` → first trial RUNNING (s)"),
    ):
        section.add(f"{label}, without load", ours_without.get(key), theirs_without.get(key))
        section.add(f"{label}, **with load**", ours_with.get(key), theirs_with.get(key))
    slowdown = _slowdown(ours_without, ours_with)
    section.add(
        "slow-down of the wall time with load (x)",
        slowdown,
        _slowdown(theirs_without, theirs_with),
        target=target(slowdown.median < 1.05 if slowdown else None, "< 1.05x"),
    )
    served = ours_with.get("load_requests_per_s")
    section.add(
        "load: requests served per second",
        served,
        theirs_with.get("load_requests_per_s"),
        bare("load_requests_per_s"),
        target(served.median >= 0.97 * offered if served else None, f"all {offered:.0f} offered (≥ 97%)"),
    )
    section.add(
        "load: request latency median (ms)",
        ours_with.get("load_median_ms"),
        theirs_with.get("load_median_ms"),
        bare("load_median_ms"),
        target(below("load_median_ms", 10), "< 10 ms"),
    )
    section.add(
        "load: request latency p99 (ms)",
        ours_with.get("load_p99_ms"),
        theirs_with.get("load_p99_ms"),
        bare("load_p99_ms"),
        target(below("load_p99_ms", 50), "< 50 ms"),
    )
    section.add("load: failed requests", ours_with.get("load_errors"), theirs_with.get("load_errors"))
    saturated, theirs_saturated = (
        ours_with.get("saturation_requests_per_s"),
        theirs_with.get("saturation_requests_per_s"),
    )
    section.add(
        "saturation: requests served per second",
        saturated,
        theirs_saturated,
        bare("saturation_requests_per_s"),
        target(saturated.median >= 5 * theirs_saturated.median, "≥ 5x NNI")
        if saturated and theirs_saturated
        else "",
    )
    section.add(
        "saturation: request latency median (ms)",
        ours_with.get("saturation_median_ms"),
        theirs_with.get("saturation_median_ms"),
        bare("saturation_median_ms"),
    )
    section.add(
        "saturation: failed requests",
        ours_with.get("saturation_errors"),
        theirs_with.get("saturation_errors"),
    )
    if not ctx.nni:
        section.notes.append("NNI's baseline has no such measurement; run with `--nni-venv` for its column.")
    return [section]


def _slowdown(without: dict[str, Figure], with_: dict[str, Figure]) -> Figure | None:
    a, b = without.get("wall_s"), with_.get("wall_s")
    if not a or not b or math.isnan(a.median):
        return None
    return Figure(b.median / a.median, b.low / a.high, b.high / a.low, b.reps)


#: issue 17: a trial's end → the next start on a host, without reuse mode (with it: REUSE_TARGET_S)
REMOTE_GAP_TARGET_S = 0.1


def remote(ctx: Context) -> list[Section]:
    """Workload 4: workload 1 (`import nni` trial, through the shim) on 3 SSH hosts in network namespaces."""
    sections = []
    for concurrency in ctx.plan.remote_concurrency:
        spec = LaunchSpec("nni", ctx.plan.remote_trials, concurrency)
        title = f"4. Remote: {spec.trials} trials on 3 SSH hosts, concurrency {concurrency}, trial does `import nni`"
        variants, why = run_remote(ctx.tf, ctx.workdir, spec, ctx.plan.reps, floor=True)
        if why is not None:
            ctx.log(f"  remote workload NOT RUN: {why}")
            section = ctx.section(title, nni=False)
            section.notes.append(f"**NOT RUN**: {why}")
            sections.append(section)
            continue
        runs, floor_runs = variants[""], variants[BARE_SSH]
        for rep, (run, bare) in enumerate(zip(runs, floor_runs, strict=True)):
            ctx.log(
                f"  remote c={concurrency} rep {rep}: wall {run['wall_s']:.2f}s gap {run['gap_median_s']:.3f}s "
                f"(SSH session and keeper alone: gap {bare['gap_median_s']:.3f}s)"
            )
        floor = figures(floor_runs)["gap_median_s"]
        early = figures(floor_runs)["gap_from_request_median_s"]
        start_floor = figures(floor_runs)["first_running_s"]
        section = launch_section(
            ctx,
            title,
            figures(runs),
            {},
            concurrency,
            nni=False,
            gap_target_s=REMOTE_GAP_TARGET_S,
            gap_floor=f"{BARE_SSH}: {cell(floor)}",
            first_floor=f"{BARE_START}: {cell(start_floor)}",
        )
        section.notes.append(
            f"Bare floor of the gap: in each repetition the same {spec.trials} trials run at concurrency "
            f"{concurrency} on the same hosts, each in an SSH session of its own that runs trialfleet's keeper in "
            "the foreground, which runs the trial: one asyncssh connection per host in the bench process, and no "
            "manager, store, probe, runner or upload (`bench/remote.py`, `bare_ssh_run`). A trial's start is the "
            "keeper's record of starting its command, its end the keeper's record of its end, so the gap holds the "
            "session and the keeper's start, as trialfleet's does (a trial is RUNNING once its launch answered): "
            "what launching each trial in an SSH session of its own, under a keeper, allows on this machine. "
            f"Counted from the moment the session is asked for, as this floor was before 2026-12-01: {cell(early)}."
        )
        section.notes.append(
            "Bare floor of `create` → first trial RUNNING, once per repetition (`bench/remote.py`, "
            "`bare_first_start`): a fresh interpreter that imports the libraries trialfleet's manager is built on "
            "(pydantic, sqlite3, asyncssh, asyncio), connects to the 3 hosts at once and runs trialfleet's keeper in "
            "an SSH session on one of them, counted from before the interpreter's start to the keeper's record of "
            "starting the trial. It leaves out the CLI, the config's models and checks, the store, the manager and "
            "the session that prepares each host."
        )
        section.notes.append(
            "Each host is a network namespace with its own sshd (tests/integration/remote/fleet.py); the bare trial "
            "runs under the hosts' /usr/bin/python3 with the shim. NNI's baseline has no remote figures."
        )
        sections.append(section)
    return sections


REUSE_TARGET_S = 0.1  # the gap between a trial's end and the next start on a host, with reuseMode


def reuse(ctx: Context) -> list[Section]:
    """Workload 7: workload 4 with ``reuseMode: true`` against ``false``, on the same fleet, taking turns."""
    spec = LaunchSpec("nni", ctx.plan.remote_trials, 2)
    title = (
        f"7. Remote reuse mode: {spec.trials} trials on 3 SSH hosts, concurrency 2, trial does `import nni`; "
        "trialfleet column: reuseMode: true"
    )
    section = ctx.section(title, nni=False)
    section.nni_label, section.ratio_label = "reuseMode: false", "ratio false / true"
    variants = {"reuse": {"reuseMode": True}, "plain": {"reuseMode": False}}
    runs, why = run_remote_variants(ctx.tf, ctx.workdir, spec, ctx.plan.reps, variants)
    if why is not None:
        ctx.log(f"  reuse workload NOT RUN: {why}")
        section.notes.append(f"**NOT RUN**: {why}")
        return [section]
    for name, group in runs.items():
        for rep, run in enumerate(group):
            ctx.log(f"  {name} rep {rep}: wall {run['wall_s']:.2f}s gap {run['gap_median_s']:.3f}s")
    ours, plain = figures(runs["reuse"]), figures(runs["plain"])
    gap = ours.get("gap_median_s")
    met = None if not gap or math.isnan(gap.median) else gap.median < REUSE_TARGET_S
    section.add("gap: a trial's end → the next start, median (s)", gap, plain.get("gap_median_s"),
                target=target(met, f"< {REUSE_TARGET_S:g} s"))  # fmt: skip
    section.add("gap p90 (s)", ours.get("gap_p90_s"), plain.get("gap_p90_s"))
    section.add(
        "`create` → first trial RUNNING (s)", ours.get("first_running_s"), plain.get("first_running_s")
    )
    section.add("trial duration in the manager, median (s)", ours.get("trial_duration_median_s"),
                plain.get("trial_duration_median_s"))  # fmt: skip
    section.add("wall, `create` → last trial's end (s)", ours.get("wall_s"), plain.get("wall_s"))
    section.add("per-trial overhead = wall x 2 / N - bare (s)", ours.get("overhead_per_trial_s"),
                plain.get("overhead_per_trial_s"))  # fmt: skip
    section.add("manager CPU per trial (ms)", ours.get("manager_cpu_ms_per_trial"),
                plain.get("manager_cpu_ms_per_trial"))  # fmt: skip
    section.add("trials SUCCEEDED", ours.get("succeeded"), plain.get("succeeded"))
    section.notes.append(
        "Both columns are trialfleet on the same fleet (tests/integration/remote/fleet.py), the two modes taking "
        "turns in each repetition; the ratio column is reuseMode: false over true. With reuse each host runs one "
        "probe (`probe.py serve`) over the open SSH link that launches, polls and reports a keeper's end at once."
    )
    return [section]


STOP_TARGET_S = 1.0


def stop(ctx: Context) -> list[Section]:
    """Workload 8: ``stop`` with 8 running trials, each a process tree two deep."""
    ours = figures([_logged(ctx, run_stop(ctx.tf, ctx.workdir)) for _ in range(ctx.plan.reps)])
    if ctx.nni:
        theirs = figures([_logged(ctx, run_stop(ctx.nni, ctx.workdir)) for _ in range(ctx.plan.nni_reps)])
    else:
        theirs = baseline.STOP
    section = ctx.section("8. Stop: 8 running trials, each a process tree two deep (the trial and a child)")
    gone = ours.get("stop_to_all_gone_s")
    left = ours.get("left_after_30s")
    met = None if gone is None or left is None else gone.median < STOP_TARGET_S and left.high == 0
    section.add("`stop` command itself (s)", ours.get("stop_cmd_s"), theirs.get("stop_cmd_s"))
    section.add(
        "**`stop` → every process of the experiment gone (s)**",
        gone,
        theirs.get("stop_to_all_gone_s"),
        "",
        target(met, f"< {STOP_TARGET_S:g} s, none left"),
    )
    section.add(
        "processes of the experiment before `stop`",
        ours.get("processes_before"),
        theirs.get("processes_before"),
    )
    section.add("processes left 30 s after `stop`", left, theirs.get("left_after_30s"))
    if not ctx.nni:
        section.notes.append(baseline.STOP_NOTE)
    return [section]


def _logged(ctx: Context, run: dict[str, float]) -> dict[str, float]:
    ctx.log(
        f"  stop: command {run['stop_cmd_s']:.2f}s, all gone {run['stop_to_all_gone_s']:.2f}s, "
        f"left {run['left_after_30s']:.0f} of {run['processes_before']:.0f}"
    )
    return run
