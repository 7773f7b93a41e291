"""The machine the figures were taken on, and its bare floors (what a process costs with no manager at all)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import Figure
from bench.systems import TRIALS_DIR, System


def describe() -> dict[str, str]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kib / 2**20:.1f} GiB",
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "kernel": platform.release(),
    }


def time_command(
    argv: list[str], reps: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Figure:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(
            argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
        )
        times.append(time.perf_counter() - start)
    return Figure.of(times)


def floors(reps: int) -> dict[str, Figure]:
    """The machine's bare floors: a fork/exec, and an empty Python process start."""
    return {
        "fork/exec of /bin/true": time_command(["/bin/true"], reps),
        "python -c pass": time_command([sys.executable, "-c", "pass"], reps),
        "python -I -S -c pass (the keeper's start)": time_command(
            [sys.executable, "-I", "-S", "-c", "pass"], reps
        ),
    }


def bare_trial(system: System, script: str, reps: int, env: dict[str, str] | None = None) -> Figure:
    """The trial run alone, with no manager (its standalone mode), in a scratch directory."""
    run_env = {**system.env, **(env or {})}
    run_env.pop("NNI_PLATFORM", None)
    if system.name == "trialfleet" and script != "trial_sdk.py":
        from trialfleet.compat import trial_pythonpath_env

        run_env.update(trial_pythonpath_env(run_env))  # `import nni` is the shim, as the manager arranges
    if (
        script == "trial_light.py"
    ):  # needs NNI's channel: its bare cost is its imports (NNI baseline's choice)
        argv = [system.python, "-c", "import json, os, urllib.request, urllib.error"]
    else:
        argv = [system.python, str(TRIALS_DIR / script)]
    with tempfile.TemporaryDirectory() as scratch:
        return time_command(argv, reps, env=run_env, cwd=Path(scratch))
