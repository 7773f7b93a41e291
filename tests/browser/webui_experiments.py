"""Experiments for the browser tests: configs, a store filled with known trials, a manager process serving them."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trialfleet.config import ExperimentConfig
from trialfleet.manager.decisions import parameter_record
from trialfleet.manager.launcher import Launched, create_experiment, spawn_manager, stop_manager
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric

OPTIMIZERS = ["sgd", "adam", "rmsprop"]

#: a trial that reports eight intermediate results, then one every 0.3 s while ``hold`` exists in its
#: code directory, then a final result that depends on its parameters
TRIAL_SCRIPT = """
import math, os, sys, time
import nni

params = nni.get_next_parameter()
print("hello from", nni.get_trial_id(), flush=True)
print("to stderr", file=sys.stderr, flush=True)
bonus = {"sgd": 0.0, "adam": 0.05, "rmsprop": 0.02}[params["optimizer"]]
quality = 0.9 - abs(math.log10(params["lr"]) + 2) / 4 + bonus - params["batch_size"] / 1000
step = 0
deadline = time.time() + 120
while step < 8 or (os.path.exists("hold") and time.time() < deadline):
    nni.report_intermediate_result(round(quality * (1 - 0.7 ** (step + 1)), 4))
    step += 1
    time.sleep(0.1 if step < 8 else 0.3)
nni.report_final_result({"default": round(quality, 4), "loss": round(1 - quality, 4)})
"""

SEARCH_SPACE = {
    "lr": {"_type": "loguniform", "_value": [0.0001, 0.1]},
    "batch_size": {"_type": "choice", "_value": [16, 32, 64]},
    "optimizer": {"_type": "choice", "_value": OPTIMIZERS},
}


def make_config(tmp_path: Path, **overrides: object) -> ExperimentConfig:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(textwrap.dedent(TRIAL_SCRIPT))
    fields: dict[str, object] = {
        "experiment_name": "mnist-pytorch",
        "trial_command": f"{sys.executable} trial.py",
        "trial_code_directory": str(code),
        "trial_concurrency": 1,
        "max_trial_number": 6,
        "max_experiment_duration": "1h",
        "search_space": SEARCH_SPACE,
        "tuner": {"name": "Random", "classArgs": {"seed": 1, "optimize_mode": "maximize"}},
        "experiment_working_directory": str(tmp_path / "experiments"),
    }
    fields.update(overrides)
    return ExperimentConfig.for_platform("local", **fields)


def hold_trials(tmp_path: Path, hold: bool) -> None:
    """Trials keep running (and reporting) while the hold file exists."""
    path = tmp_path / "code" / "hold"
    if hold:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    else:
        path.unlink(missing_ok=True)


def params_of(i: int) -> dict[str, object]:
    return {
        "lr": round(0.001 + (i % 97) / 1000, 4),
        "batch_size": [16, 32, 64][i % 3],
        "optimizer": OPTIMIZERS[i % 3],
    }


def final_of(i: int) -> float:
    """A known final metric per trial: the best (max) of n trials is trial n-1 when n <= 97."""
    return round(0.5 + (i % 97) / 200, 4)


def fill(
    store: ExperimentStore, trials: int, metrics_per_trial: int, statuses: list[TrialStatus] | None = None
) -> None:
    """``trials`` trials written through the store, with ``metrics_per_trial`` intermediate results each;
    trial i gets ``statuses[i]`` (SUCCEEDED with a final metric by default)."""
    metrics: list[NewMetric] = []
    t0 = time.time() - trials * 10 - 60  # the newest trial started a minute ago
    for i in range(trials):
        trial_id = f"t{i:05d}"
        status = statuses[i] if statuses else TrialStatus.SUCCEEDED
        start = t0 + i * 10
        store.add_trial(trial_id, parameter_record(i, params_of(i)), start - 1)
        if status is TrialStatus.WAITING:
            continue
        store.mark_submitted(
            trial_id,
            {"trial_dir": f"/nonexistent/{trial_id}"},
            f"local:/trials/{trial_id}",
            start,
            running=True,
        )
        for step in range(metrics_per_trial):
            value = final_of(i) * (step + 1) / metrics_per_trial
            metrics.append(NewMetric(trial_id, i, "PERIODICAL", step, json.dumps(value), start + step))
        if status is TrialStatus.SUCCEEDED:
            data = json.dumps({"default": final_of(i), "loss": round(1 - final_of(i), 4)})
            metrics.append(NewMetric(trial_id, i, "FINAL", 0, data, start + 9, final_value=final_of(i)))
        if status is not TrialStatus.RUNNING:
            store.end_trial(
                trial_id, status, start + 5 + i % 7, exit_code=0 if status is TrialStatus.SUCCEEDED else 1
            )
    for chunk in range(0, len(metrics), 20_000):
        store.add_metrics(metrics[chunk : chunk + 20_000], {})


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_experiment(tmp_path: Path, **overrides: object) -> tuple[str, Path]:
    return create_experiment(make_config(tmp_path, **overrides))


@contextmanager
def manager_process(experiment_dir: Path, action: str) -> Iterator[Launched]:
    """The real manager process (``python -m trialfleet.manager``) serving the experiment and its web UI."""
    launched = spawn_manager(experiment_dir, action, free_port())
    try:
        yield launched
    finally:
        stop_manager(launched.pid, experiment_dir)
