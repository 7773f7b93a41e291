"""Several experiments on one machine's 2 GPUs (the nvidia-smi double): real managers, keepers and trials.

Every trial appends when it started and ended (CLOCK_MONOTONIC, one clock for the whole machine), its
experiment and its CUDA_VISIBLE_DEVICES to one shared log. Checked: no two trials of different experiments ran
on one GPU at overlapping times, every trial succeeded, and a manager SIGKILLed while its trials hold GPUs
neither loses their leases (the other experiment waits, its reason naming the holder) nor leaks them (they end
with its trials, before it is resumed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_harness import Cli, wait_until
from tests.integration.test_crash_recovery import start_manager, wait_for_status
from trialfleet.config import ExperimentConfig
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.training_services.gpu_leases import machine_holdings

DOUBLES = Path(__file__).resolve().parents[1] / "doubles"

TRIAL_SCRIPT = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
start = time.monotonic()
hold = os.path.join(os.environ["SHARED_FLEET_DIR"], "hold-" + os.environ["NNI_EXP_ID"])
deadline = time.time() + 120
while os.path.exists(hold) and time.time() < deadline:
    time.sleep(0.05)
time.sleep(params["pause"])
machine = os.environ["TRIALFLEET_LEASE_DIR"]  # one per machine: on the sshd test hosts, one per host
gpus = [machine + ":" + index for index in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
record = {"experiment": os.environ["NNI_EXP_ID"], "trial": nni.get_trial_id(),
          "gpus": gpus, "start": start, "end": time.monotonic()}
with open(os.path.join(os.environ["SHARED_FLEET_DIR"], "runs.log"), "a") as log:
    log.write(json.dumps(record) + "\\n")
nni.report_final_result(params["pause"])
"""


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The double's 2 GPUs, this test's lease directory and the shared log, inherited by managers and trials."""
    scenario = tmp_path / "gpus.json"
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-{i}",
            "name": "T4",
            "memory_total": 15360,
            "memory_used": 0,
            "utilization": 0,
        }
        for i in range(2)
    ]
    scenario.write_text(json.dumps({"gpus": gpus, "processes": []}))
    monkeypatch.setenv("PATH", f"{DOUBLES}:{os.environ['PATH']}")
    monkeypatch.setenv("TRIALFLEET_FAKE_GPUS", str(scenario))
    monkeypatch.setenv("TRIALFLEET_LEASE_DIR", str(tmp_path / "leases"))
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SHARED_FLEET_DIR", str(tmp_path))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL_SCRIPT)
    return tmp_path


def gpu_experiment(
    root: Path, trials: int, python: str = sys.executable, **platform: Any
) -> tuple[str, Path]:
    """An experiment of ``trials`` trials, 2 at once, one GPU each, on ``platform`` (local unless given)."""
    config = ExperimentConfig.for_platform(
        str(platform.pop("platform", "local")),
        trial_command=f"SHARED_FLEET_DIR={root} {python} trial.py",
        trial_code_directory=str(root / "code"),
        trial_concurrency=2,
        trial_gpu_number=1,
        max_trial_number=trials,
        search_space={"pause": {"_type": "uniform", "_value": [0.05, 0.3]}},
        tuner={"name": "Random"},
        experiment_working_directory=str(root / "exps"),
        **platform,
    )
    experiment_id, experiment_dir = create_experiment(config)
    return experiment_id, experiment_dir


def runs(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "runs.log").read_text().splitlines()]


def assert_no_clash(records: list[dict[str, Any]]) -> int:
    """No two trials of different experiments overlapped on a GPU (a machine's lease directory and an index);
    the number of hand-overs between experiments (a GPU used by one, then by another): they shared them."""
    for a, b in combinations(records, 2):
        shared = set(a["gpus"]) & set(b["gpus"])
        if a["experiment"] != b["experiment"] and shared:
            overlap = a["start"] < b["end"] and b["start"] < a["end"]
            assert not overlap, f"trials of two experiments on GPU {shared} at once: {a} {b}"
    handovers = 0
    for gpu in {gpu for record in records for gpu in record["gpus"]}:
        on_gpu = sorted((r for r in records if gpu in r["gpus"]), key=lambda r: r["start"])
        handovers += sum(1 for x, y in pairwise(on_gpu) if x["experiment"] != y["experiment"])
    return handovers


def finish(managers: list[subprocess.Popen[bytes]], dirs: list[Path]) -> None:
    for experiment_dir in dirs:
        store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
        assert wait_for_status(store, {"DONE", "ERROR"}, timeout=240) == "DONE"
        for trial in store.trials():
            assert trial.status is TrialStatus.SUCCEEDED, (trial.id, trial.status, trial.message)
    for manager in managers:
        manager.send_signal(signal.SIGTERM)
        assert manager.wait(timeout=60) == 0


def run_together(
    root: Path, created: list[tuple[str, Path]], trials: int
) -> tuple[list[dict[str, Any]], int]:
    """Run the experiments at once to their end; what their trials logged, and the GPU hand-overs between them
    (checked: every trial ran, no clash, and they did share GPUs)."""
    managers = [start_manager(experiment_dir, "create") for _, experiment_dir in created]
    try:
        finish(managers, [experiment_dir for _, experiment_dir in created])
    finally:  # a failed run leaves no manager behind to hold leases or ports for the tests after it
        for manager in managers:
            if manager.poll() is None:
                manager.kill()
                manager.wait()
    records = runs(root)
    assert len(records) == trials * len(created)
    handovers = assert_no_clash(records)
    assert handovers, "the experiments never shared a GPU: the test proved nothing"
    return records, handovers


@pytest.mark.slow
@pytest.mark.parametrize("experiments", [2, 5])
def test_experiments_sharing_two_gpus_never_clash(fleet: Path, experiments: int) -> None:
    created = [gpu_experiment(fleet, trials=4, use_active_gpu=False) for _ in range(experiments)]
    records, handovers = run_together(fleet, created, trials=4)
    assert machine_holdings() == {}, "leases outlived every trial"
    print(f"\n{experiments} experiments, {len(records)} trials on 2 GPUs, {handovers} hand-overs, no clash")


def held_gpus(experiment_id: str) -> list[int]:
    holding = machine_holdings().get(experiment_id)
    return sorted(holding.gpus) if holding is not None else []


def store_of(experiment_dir: Path) -> ExperimentStore:
    return ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)


@pytest.mark.slow
def test_a_sigkilled_managers_leases_are_neither_lost_nor_leaked(fleet: Path) -> None:
    (first_id, first_dir), (second_id, second_dir) = (
        gpu_experiment(fleet, trials=4, use_active_gpu=False) for _ in range(2)
    )
    (fleet / f"hold-{first_id}").touch()
    first = start_manager(first_dir, "create")
    wait_until(lambda: held_gpus(first_id) == [0, 1], "the first experiment's trials on both GPUs")
    first.send_signal(signal.SIGKILL)
    first.wait()

    second = start_manager(second_dir, "create")  # its trials wait: the dead manager's trials hold both GPUs
    wait_until(
        lambda: any(first_id in (t.message or "") for t in store_of(second_dir).trials()), "a waiting reason"
    )
    waiting = [t for t in store_of(second_dir).trials() if t.status is TrialStatus.WAITING]
    assert waiting and f"leased to experiment {first_id}" in (waiting[0].message or "")
    assert held_gpus(first_id) == [0, 1], "the SIGKILLed manager's leases were lost"
    listed = {e["id"]: e for e in Cli.in_dir(fleet).json("experiment", "list", "--all", "--json")}
    assert listed[first_id]["gpuLeases"]["localhost"]["gpus"] == [0, 1]
    assert listed[second_id]["gpuLeases"]["localhost"]["waiting"] == 1
    assert "GPU 0,1" in Cli.in_dir(fleet).ok("experiment", "list", "--all")

    (fleet / f"hold-{first_id}").unlink()  # its trials end without a manager: their leases end with them
    wait_until(lambda: first_id not in machine_holdings(), "the dead manager's leases to end")
    resumed = start_manager(first_dir, "resume")
    finish([second, resumed], [first_dir, second_dir])
    records = runs(fleet)
    assert len(records) == 8
    assert_no_clash(records)
    assert machine_holdings() == {}
