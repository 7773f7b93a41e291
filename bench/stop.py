"""Workload 8, stop: ``stop`` an experiment whose 8 trials run, each a process tree two deep.

Measured: the ``stop`` command's own time, and the time from just before it until no process is left of the
experiment: the manager (and NNI's dispatcher, a child of it) gone, no process whose environment names the
experiment (``NNI_EXP_ID``, which both systems give every trial process and its children) and none whose command
line names its directory (trialfleet's keeper spawner and the trial keepers it forks, which keep its command line).
Processes still there 30 s after the command are counted, then killed so the run can go on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from bench import procs
from bench.rest import wait_for
from bench.systems import System

LEFT_AFTER_S = 30.0


def run_stop(system: System, workdir: Path, trials: int = 8, timeout: float = 300) -> dict[str, float]:
    name = f"{system.name}-stop-{trials}-{time.time_ns()}"
    config = system.write_experiment(
        workdir / name, "trial_hold.py", trials=trials, concurrency=trials, env={"BENCH_SECONDS": "600"}
    )
    created = system.create(config)
    try:
        wait_for(created.base, "/trial-jobs", lambda jobs: _running(jobs) == trials, timeout, poll=0.2)
        manager = system.manager_pids(created.experiment_id)
        marker = f"NNI_EXP_ID={created.experiment_id}".encode()
        directory = str(workdir / name).encode()
        deadline = time.monotonic() + timeout
        while (
            len(_marked(marker, directory)) < 2 * trials and time.monotonic() < deadline
        ):  # each trial's child too
            time.sleep(0.05)
        before = len(_marked(marker, directory))
        t0 = time.monotonic()
        code, out = system.run("stop", created.experiment_id, timeout=LEFT_AFTER_S + 60)
        stop_cmd_s = time.monotonic() - t0
        if code != 0:
            raise RuntimeError(f"{system.name} stop failed (exit {code}):\n{out[-2000:]}")
        left: list[int] = []
        while time.monotonic() - t0 < LEFT_AFTER_S:
            left = [*_marked(marker, directory), *(pid for pid in manager if procs.alive(pid))]
            if not left:
                break
            time.sleep(0.01)
        gone_s = time.monotonic() - t0
        for pid in left:  # so that the next run starts on a quiet machine
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return {
            "trials": float(trials),
            "processes_before": float(before),
            "stop_cmd_s": stop_cmd_s,
            "stop_to_all_gone_s": gone_s if not left else float("nan"),
            "left_after_30s": float(len(left)),
        }
    finally:
        if procs.alive(system.manager_pid(created.experiment_id)):
            system.stop(created.experiment_id)


def _running(jobs: list[dict[str, Any]]) -> int:
    return sum(1 for job in jobs if job.get("status") == "RUNNING")


def _marked(marker: bytes, directory: bytes) -> list[int]:
    """Live processes (not this one) whose environment holds ``marker`` or whose command line names
    ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if (marker in environ.split(b"\0") or directory in cmdline) and procs.alive(int(entry.name)):
            found.append(int(entry.name))
    return found
