"""Workload 4: the launch-overhead workload on 3 SSH hosts, each a network namespace with its own sshd.

The hosts come from the remote platform's test fixture (``tests/integration/remote/fleet.py``), imported
rather than copied. When they cannot be built here, the reason is returned and printed with the results.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.launch import LaunchSpec, run_launch
from bench.stats import Figure
from bench.systems import TRIALS_DIR, System

FLEET_DIR = Path(__file__).resolve().parent.parent / "tests" / "integration" / "remote"
HOSTS = 3
HOST_PYTHON = "/usr/bin/python3"  # what `python3` is in an SSH session on the hosts


def run_remote(
    system: System, workdir: Path, spec: LaunchSpec, reps: int
) -> tuple[list[dict[str, float]], str | None]:
    """The runs, or no runs and why the fleet could not be used."""
    runs, why = run_remote_variants(system, workdir, spec, reps, {"": {}})
    return runs.get("", []), why


def run_remote_variants(
    system: System, workdir: Path, spec: LaunchSpec, reps: int, variants: dict[str, dict[str, Any]]
) -> tuple[dict[str, list[dict[str, float]]], str | None]:
    """Per variant (extra keys of the ``trainingService`` block), its runs on one fleet, the variants taking
    turns in each repetition so that the machine's drifting load touches them alike; or why there are none."""
    sys.path.insert(0, str(FLEET_DIR))
    try:
        from fleet import Fleet, missing_components
    except ImportError as exc:
        return {}, f"the fleet helper cannot be imported from {FLEET_DIR}: {exc}"
    missing = missing_components()
    if missing:
        return {}, f"missing for the SSH fleet: {', '.join(missing)}"
    bare = bare_remote_trial(reps=5).median
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as base:
        fleet = Fleet(Path(base), HOSTS)
        try:
            fleet.up()
            machines = [host.machine() for host in fleet.hosts]
            for _ in range(reps):
                for name, extra in variants.items():
                    service = {"platform": "remote", "machineList": machines, **extra}
                    run = run_launch(system, workdir, spec, bare, training_service=service, python="python3")
                    runs[name].append(run)
        except (OSError, subprocess.SubprocessError, AssertionError, RuntimeError) as exc:
            return {}, f"the remote run failed: {type(exc).__name__}: {exc}"
        finally:
            fleet.down()
    return runs, None


def bare_remote_trial(reps: int) -> Figure:
    """The trial alone under the hosts' interpreter, ``import nni`` being trialfleet's shim."""
    from bench.machine import time_command
    from trialfleet.compat import SHIM_PATH

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SHIM_PATH)}
    with tempfile.TemporaryDirectory() as scratch:
        return time_command([HOST_PYTHON, str(TRIALS_DIR / "trial_nni.py")], reps, env=env, cwd=Path(scratch))
