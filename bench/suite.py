"""What a benchmark run needs: its plan (sizes, repetitions) and its context (systems, floors, earlier runs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import machine, procs
from bench.launch import LaunchSpec, run_launch
from bench.report import Section
from bench.stats import Figure
from bench.systems import System


@dataclass(frozen=True)
class Plan:
    launch_trials: int = 100
    reps: int = 3
    nni_reps: int = 2
    ingest_count: int = 10_000
    scale_sizes: tuple[int, ...] = (1_000, 10_000)
    scale_requests: int = 200
    large_sizes: tuple[int, ...] = (10_000, 100_000)
    resume_trials: int = 100
    remote_trials: int = 100
    remote_concurrency: tuple[int, ...] = (2, 8)
    load_clients: int = 50
    load_interval: float = 0.5


QUICK = Plan(
    launch_trials=20,
    reps=2,
    nni_reps=1,
    ingest_count=2_000,
    scale_sizes=(200, 1_000),
    scale_requests=30,
    large_sizes=(1_000, 10_000),
    resume_trials=20,
    remote_trials=20,
    remote_concurrency=(8,),
)


@dataclass
class Context:
    plan: Plan
    workdir: Path
    tf: System
    nni: System | None
    floors: dict[str, Figure]
    log: Callable[[str], None] = print

    @property
    def nni_label(self) -> str:
        return "NNI 3.0 (live, this run)" if self.nni else "NNI (baseline file, not re-measured)"

    def section(self, title: str, *, nni: bool = True) -> Section:
        return Section(title, self.nni_label if nni else "", load=procs.load_average())

    def floor(self, name: str) -> str:
        found = self.floors.get(name)
        return f"{name}: {found.median:.3f} s" if found else ""


def repeat(ctx: Context, system: System, spec: LaunchSpec, script: str, reps: int) -> list[dict[str, float]]:
    """``reps`` runs, each right after its own bare-trial measurement (the machine's load drifts)."""
    runs = []
    for rep in range(reps):
        bare = machine.bare_trial(system, script, 5).median
        run = run_launch(system, ctx.workdir, spec, bare)
        load = f"{spec.load_clients}{' (bare server)' if spec.floor else ''}"
        ctx.log(
            f"  {system.name} {spec.kind} n={spec.trials} c={spec.concurrency} load={load} rep {rep}: "
            f"wall {run['wall_s']:.2f}s overhead/trial {run['overhead_per_trial_s']:.3f}s "
            f"gap {run['gap_median_s']:.3f}s (load average {procs.load_average()})"
        )
        runs.append(run)
    return runs
