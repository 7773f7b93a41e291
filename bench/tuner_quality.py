"""Tuner quality: how good a point each built-in tuner finds within a fixed number of evaluations.

Standard test functions, all minimised: Branin (2-D, minimum 0.397887), Hartmann-6 (6-D, minimum -3.32237) and
a noisy 5-D quadratic (minimum 0, observations carry N(0, 0.5^2) noise). Each tuner is driven in-process, one
evaluation at a time (generate_parameters, receive_trial_result, trial_end), for ``--evals`` evaluations and
``--seeds`` seeds; every tuner is told ``optimize_mode: minimize`` explicitly (the NNI defaults differ: TPE
minimises, GP maximises). The score of a run is the best value found; for the noisy function it is the
noise-free value at the point whose *observation* was best (what a user would pick). Multi-fidelity and
schedule tuners (Hyperband, BOHB, PBT) and the enumerating ones (Batch, GridSearch) are not compared here.

    python -m bench.tuner_quality [--evals 60] [--seeds 5] [--jobs 2] [--results bench/TUNER_QUALITY.md]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.machine import describe

RESULTS = Path(__file__).with_name("TUNER_QUALITY.md")
BASELINE = "Random"
# the model-based tuners with their NNI defaults (only the seed and the direction are set)
TUNERS = ("Random", "TPE", "GP", "Metis", "SMAC", "Anneal", "Evolution", "RegularizedEvolutionTuner")

_HARTMANN_ALPHA = (1.0, 1.2, 3.0, 3.2)
_HARTMANN_A = (
    (10, 3, 17, 3.5, 1.7, 8),
    (0.05, 10, 17, 0.1, 8, 14),
    (3, 3.5, 1.7, 10, 17, 8),
    (17, 8, 0.05, 10, 0.1, 14),
)
_HARTMANN_P = (
    (0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886),
    (0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991),
    (0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650),
    (0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381),
)
_QUADRATIC_CENTRE = (1.0, -2.0, 0.5, 3.0, -1.5)
NOISE = 0.5


def branin(p: dict[str, float]) -> float:
    x1, x2 = p["x1"], p["x2"]
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def hartmann6(p: dict[str, float]) -> float:
    x = [p[f"x{i}"] for i in range(6)]
    total = 0.0
    for alpha, a_row, p_row in zip(_HARTMANN_ALPHA, _HARTMANN_A, _HARTMANN_P, strict=True):
        total += alpha * math.exp(-sum(a * (xi - pi) ** 2 for a, xi, pi in zip(a_row, x, p_row, strict=True)))
    return -total


def quadratic5(p: dict[str, float]) -> float:
    return sum((p[f"x{i}"] - c) ** 2 for i, c in enumerate(_QUADRATIC_CENTRE))


@dataclass(frozen=True)
class Problem:
    name: str
    space: dict[str, Any]
    function: Callable[[dict[str, float]], float]
    minimum: float
    noisy: bool = False


def _uniform(names: list[str], low: float, high: float) -> dict[str, Any]:
    return {name: {"_type": "uniform", "_value": [low, high]} for name in names}


PROBLEMS = {
    "branin": Problem(
        "Branin (2-D)",
        {"x1": {"_type": "uniform", "_value": [-5, 10]}, "x2": {"_type": "uniform", "_value": [0, 15]}},
        branin,
        0.397887,
    ),
    "hartmann6": Problem(
        "Hartmann-6 (6-D)", _uniform([f"x{i}" for i in range(6)], 0, 1), hartmann6, -3.32237
    ),
    "quadratic5": Problem(
        "noisy quadratic (5-D)", _uniform([f"x{i}" for i in range(5)], -5, 5), quadratic5, 0.0, noisy=True
    ),
}


@dataclass(frozen=True)
class Run:
    best: float  # noise-free value at the best observed point
    seconds_per_proposal: float


def run_one(problem_key: str, tuner_name: str, seed: int, evals: int) -> Run:
    """One tuner on one problem with one seed, driven in-process."""
    from trialfleet.tuning import create_tuner

    problem = PROBLEMS[problem_key]
    class_args = {"optimize_mode": "minimize", "seed": seed}  # Random accepts and ignores the mode
    algo = SimpleNamespace(name=tuner_name, class_name=None, code_directory=None, class_args=class_args)
    tuner = create_tuner(algo, problem.space)
    noise = random.Random(seed * 7919 + 1)
    best_observed, best_true, spent = math.inf, math.inf, 0.0
    for parameter_id in range(evals):
        start = time.perf_counter()
        params = tuner.generate_parameters(parameter_id)
        spent += time.perf_counter() - start
        true = problem.function(params)
        observed = true + noise.gauss(0, NOISE) if problem.noisy else true
        tuner.receive_trial_result(parameter_id, params, observed)
        tuner.trial_end(parameter_id, True)
        if observed < best_observed:
            best_observed, best_true = observed, true
    return Run(best_true, spent / evals)


def measure(
    problems: list[str], tuners: list[str], seeds: int, evals: int, jobs: int
) -> dict[tuple[str, str], list[Run]]:
    tasks = [(p, t, s) for p in problems for t in tuners for s in range(1, seeds + 1)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {task: pool.submit(run_one, *task, evals) for task in tasks}
        results: dict[tuple[str, str], list[Run]] = {}
        for (problem, tuner, _), future in futures.items():
            results.setdefault((problem, tuner), []).append(future.result())
    return results


def table(problem_key: str, tuners: list[str], results: dict[tuple[str, str], list[Run]]) -> list[str]:
    problem = PROBLEMS[problem_key]
    baseline = [run.best for run in results[(problem_key, BASELINE)]]
    lines = [
        f"### {problem.name}, minimum {problem.minimum:g}",
        "",
        "| tuner | median best | spread (min .. max) | wins vs Random | median gap to minimum | s per proposal |",
        "|---|---|---|---|---|---|",
    ]
    for tuner in tuners:
        bests = [run.best for run in results[(problem_key, tuner)]]
        median = statistics.median(bests)
        wins = (
            "—"
            if tuner == BASELINE
            else f"{sum(b < r for b, r in zip(bests, baseline, strict=True))}/{len(bests)}"
        )
        seconds = statistics.median(run.seconds_per_proposal for run in results[(problem_key, tuner)])
        lines.append(
            f"| {tuner} | {median:.4g} | {min(bests):.4g} .. {max(bests):.4g} | {wins} | "
            f"{median - problem.minimum:.3g} | {seconds:.3f} |"
        )
    return lines


def report(
    problems: list[str], tuners: list[str], seeds: int, evals: int, results: Any, loads: tuple[float, float]
) -> str:
    machine = describe()
    lines = [
        "# Tuner quality",
        "",
        f"Taken {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} on {machine['cpu']}, {machine['cores']} "
        f"cores, {machine['memory']}, {machine['python']}.",
        "",
        f"{evals} evaluations per run, one at a time, seeds 1..{seeds}; every tuner minimises with its NNI "
        "defaults otherwise. *Best* is the noise-free value at the best observed point; *wins vs Random*: "
        "seeds on which the tuner's best is lower than Random's with the same seed number. Produced by "
        "`python -m bench.tuner_quality` (see its docstring).",
        "",
        f"Load average (1 min) at the start and the end: {loads[0]:.1f}, {loads[1]:.1f}. The *s per proposal* "
        "column is CPU-bound, so it grows with the load; the best values do not depend on it (seeded runs).",
        "",
    ]
    for problem in problems:
        lines += [*table(problem, tuners, results), ""]
    return "\n".join(lines + notes(problems, tuners, evals, results))


def notes(
    problems: list[str], tuners: list[str], evals: int, results: dict[tuple[str, str], list[Run]]
) -> list[str]:
    """Say which tuners never left their random start within the budget (their rows repeat Random's)."""
    same = [
        tuner
        for tuner in tuners
        if tuner != BASELINE
        and all(
            [r.best for r in results[(p, tuner)]] == [r.best for r in results[(p, BASELINE)]]
            for p in problems
        )
    ]
    if not same:
        return []
    return [
        f"{', '.join(same)}: identical to Random on every run. With NNI's defaults the first proposals are a "
        f"random population larger than {evals} evaluations, drawn as Random draws them.",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--evals", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="processes running tuners side by side")
    parser.add_argument("--tuners", nargs="+", default=list(TUNERS), choices=TUNERS)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    tuners = [BASELINE, *(t for t in args.tuners if t != BASELINE)]
    load_before = os.getloadavg()[0]
    results = measure(args.problems, tuners, args.seeds, args.evals, args.jobs)
    loads = (load_before, os.getloadavg()[0])
    text = report(args.problems, tuners, args.seeds, args.evals, results, loads)
    args.results.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
