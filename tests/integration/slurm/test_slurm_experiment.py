"""A whole experiment on the Slurm platform: the real manager runs 10 trials, 2 at a time, as Slurm jobs.

The trials use ``import nni`` (the shim, put on their path by the job) and live in a code directory outside the
shared directory, so they run in the copy made there; ``pythonPath`` puts this interpreter first on the jobs'
PATH.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from slurm_cluster import SlurmCluster

from trialfleet.config import ExperimentConfig
from trialfleet.status import TrialStatus
from trialfleet.testing.running import RunningExperiment

pytestmark = pytest.mark.slurm

TRIALS = 10
CONCURRENCY = 2
TRIAL = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
start = time.time()
for step in range(3):
    nni.report_intermediate_result(params["x"] * 10 + step)
    time.sleep(0.1)
nni.report_final_result(params["x"])
record = {"start": start, "end": time.time(), "job": os.environ.get("SLURM_JOB_ID"), "nni": nni.__file__,
          "python": sys.executable, "params": params}
name = os.path.join(sys.argv[1], os.environ["NNI_TRIAL_JOB_ID"])
with open(name + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(name + ".tmp", name + ".json")
"""


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


async def test_ten_trials_two_at_a_time_through_the_manager(
    tmp_path: Path, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    code_dir, records = tmp_path / "code", tmp_path / "records"
    code_dir.mkdir()
    records.mkdir()
    (code_dir / "trial.py").write_text(TRIAL)
    config = ExperimentConfig.from_dict(
        {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": f"python3 trial.py {records}",
            "trialCodeDirectory": str(code_dir),
            "trialConcurrency": CONCURRENCY,
            "maxTrialNumber": TRIALS,
            "tuner": {"name": "Random"},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": {
                "platform": "slurm",
                "sharedDirectory": str(tmp_path / "shared"),
                "pythonPath": str(Path(sys.executable).parent),
                "cpusPerTrial": 1,
                "memory": "100mb",
            },
        }
    )
    async with RunningExperiment(config) as experiment:
        await experiment.done()
        trials = experiment.store.trials()
        assert len(trials) == TRIALS
        assert {trial.status for trial in trials} == {TrialStatus.SUCCEEDED}
        ran = {trial.id: json.loads((records / f"{trial.id}.json").read_text()) for trial in trials}
        for trial in trials:
            record = ran[trial.id]
            assert record["params"] == trial.hyper_parameters
            assert record["job"] == trial.handle["job_id"] and trial.attempt == 0
            assert Path(record["python"]).parent == Path(sys.executable).parent  # pythonPath came first
            assert "/nni-shim/nni/" in record["nni"]
            x = trial.hyper_parameters["x"]
            periodical = experiment.store.metrics(trial.id, type="PERIODICAL")
            assert [json.loads(m.data) for m in periodical] == [x * 10 + step for step in range(3)]
            assert trial.final_value == x
            name = f"nni_exp_{experiment.experiment_id}_trial_{trial.id}"
            jobs = slurm_cluster.run(
                "squeue", "-h", "-t", "all", f"--name={name}", "-o", "%i %T"
            ).stdout.split()
            assert jobs == [trial.handle["job_id"], "COMPLETED"]
        assert most_at_once([(r["start"], r["end"]) for r in ran.values()]) <= CONCURRENCY


async def test_the_example_config_runs_as_written(
    tmp_path: Path, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/slurm/config.yml, with only where things go and how many trials changed."""
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    example = Path(__file__).resolve().parents[3] / "examples" / "slurm"
    data = yaml.safe_load((example / "config.yml").read_text())
    data.update(
        maxTrialNumber=3, trialConcurrency=3, experimentWorkingDirectory=str(tmp_path / "experiments")
    )
    data["trainingService"]["sharedDirectory"] = str(tmp_path / "shared")
    config = ExperimentConfig.from_dict(data, base_dir=example)
    async with RunningExperiment(config) as experiment:
        await experiment.done()
        trials = experiment.store.trials()
        assert [trial.status for trial in trials] == [TrialStatus.SUCCEEDED] * 3
        assert all(trial.final_value is not None for trial in trials)
        assert all(len(experiment.store.metrics(trial.id, type="PERIODICAL")) == 5 for trial in trials)
