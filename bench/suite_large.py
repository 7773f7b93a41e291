"""Workload 9 as a report section: one experiment of N trials, for each size of the plan (see bench/large.py)."""

from __future__ import annotations

from bench import procs
from bench.large import LIST_ROUTES, POLL_ROUTES, run_large
from bench.report import Section, target
from bench.stats import Figure
from bench.suite import Context

#: issue 50's targets, at 100,000 trials
TRIAL_LS_S = 1.0
POLL_MS = 5.0
OVERVIEW_S = 1.0


def large(ctx: Context) -> list[Section]:
    runs = {}
    for size in ctx.plan.large_sizes:
        runs[size] = run_large(ctx.workdir / f"large-{size}", size)
        ctx.log(f"  large {size}: {runs[size]} (load average {procs.load_average()})")
    return [section_of(runs)]


def section_of(runs: dict[int, dict[str, float]]) -> Section:
    """The section of the figures of each size."""
    sizes = sorted(runs)
    section = Section(
        "9. Large: one experiment of " + " / ".join(f"{s:,}" for s in sizes) + " trials (simulated platform)",
        "",
        load=procs.load_average(),
    )
    section.rows = []
    for key in runs[sizes[0]]:
        values = [runs[s][key] for s in sizes]
        growth = values[-1] / values[-2] if len(values) > 1 and values[-2] else float("nan")
        label = (
            f"{key}: "
            + " → ".join(f"{v:,.3g}" for v in values)
            + f" (x{growth:.2g} for x{sizes[-1] // sizes[-2] if len(sizes) > 1 else 1} trials)"
        )
        section.add(label, Figure.of([values[-1]]), None, "", _target(key, values[-1], sizes[-1]))
    section.notes += [
        "The trialfleet column is the largest size; the label gives every size, small to large, and the growth "
        "from the second largest. The manager side runs on the simulated platform (real manager, store, REST "
        "server and web UI; trials run no process); see bench/large.py for how each figure is taken.",
        f"Per-poll routes: {', '.join(POLL_ROUTES)}; whole lists: {', '.join(LIST_ROUTES)}.",
    ]
    return section


def _target(key: str, value: float, size: int) -> str:
    if size < 100_000:
        return ""
    if key == "trial_ls_s":
        return target(value < TRIAL_LS_S, f"< {TRIAL_LS_S} s")
    if key.startswith("p50 "):
        return target(value < POLL_MS, f"< {POLL_MS} ms")
    if key in ("overview first chart (s)", "overview first chart, cold (s)"):
        return target(value < OVERVIEW_S, f"< {OVERVIEW_S} s")
    return ""
