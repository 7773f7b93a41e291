"""Reuse mode on a real Slurm: worker jobs that run trial after trial (trialfleet/training_services/batch/reuse.py).

The whole experiment runs 8 trials, 2 at a time, through the real manager and counts the Slurm jobs; the service
tests take a worker through what a cluster does to it: a cancel of one of its trials, a manager that restarts,
the worker killed while a trial runs, and two trials sharing one worker's GPU.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster
from slurm_helpers import hold_command, seen_by, slurm_context, submitted, trial_spec

from trialfleet.config import ExperimentConfig
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import poll_until, wait_for_file
from trialfleet.testing.running import RunningExperiment
from trialfleet.training_services.slurm import SlurmTrainingService

pytestmark = pytest.mark.slurm

TRIALS, CONCURRENCY = 8, 2
TRIAL = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
for step in range(3):
    nni.report_intermediate_result(params["x"] * 10 + step)
nni.report_final_result(params["x"])
record = {"job": os.environ.get("SLURM_JOB_ID"), "trial": os.environ["NNI_TRIAL_JOB_ID"], "pid": os.getpid()}
name = os.path.join(sys.argv[1], os.environ["NNI_TRIAL_JOB_ID"] + "-" + str(os.getpid()))
with open(name + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(name + ".tmp", name + ".json")
"""


def jobs_named(cluster: SlurmCluster, experiment_id: str) -> list[str]:
    """Every Slurm job of the experiment (trials' and workers'), as ``<id> <name> <state>``."""
    out = cluster.run("squeue", "-h", "-t", "all", "-o", "%i %j %T").stdout
    return [line for line in out.splitlines() if f"nni_exp_{experiment_id}_" in line]


async def test_eight_trials_in_reuse_mode_run_in_at_most_four_jobs(
    tmp_path: Path,
    slurm_cluster: SlurmCluster,
    code_dir: Path,
    control: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    (code_dir / "trial.py").write_text(TRIAL)
    config = ExperimentConfig.from_dict(
        {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": f"python3 trial.py {control}",
            "trialCodeDirectory": str(code_dir),
            "trialConcurrency": CONCURRENCY,
            "maxTrialNumber": TRIALS,
            "tuner": {"name": "Random"},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": {
                "platform": "slurm",
                "reuseMode": True,
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
        assert [trial.status for trial in trials] == [TrialStatus.SUCCEEDED] * TRIALS
        runs = [json.loads(path.read_text()) for path in control.glob("*.json")]
        assert sorted(run["trial"] for run in runs) == sorted(trial.id for trial in trials)  # each ran once
        for trial in trials:
            (run,) = [run for run in runs if run["trial"] == trial.id]
            assert run["job"] == trial.handle["job_id"] and "worker" in trial.handle
            x = trial.hyper_parameters["x"]
            periodical = experiment.store.metrics(trial.id, type="PERIODICAL")
            assert [json.loads(m.data) for m in periodical] == [x * 10 + step for step in range(3)]
            assert trial.final_value == x
        jobs = jobs_named(slurm_cluster, experiment.experiment_id)
        assert {line.split()[1].split("_")[3] for line in jobs} == {"worker"}  # no job of a trial's own
        assert len({trial.handle["job_id"] for trial in trials}) == len(jobs) <= 4


async def test_a_cancelled_trial_leaves_its_worker_running_for_the_next(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    service = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path / "shared", reuse_mode=True))
    await service.start()
    try:
        first = await submitted(service, trial_spec("first", hold_command(control), code_dir))
        await wait_for_file(control / "first.json")
        await service.cancel("first")
        ended = (await poll_until(service, lambda s: "first" in s.ended)).ended["first"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        assert not _alive(int(str(seen_by(control, "first")["pid"])))
        second = await submitted(service, trial_spec("second", hold_command(control), code_dir))
        assert second.handle["job_id"] == first.handle["job_id"]
        await wait_for_file(control / "second.json")
        (control / "release").touch()
        ended = (await poll_until(service, lambda s: "second" in s.ended)).ended["second"]
        assert ended.status is TrialStatus.SUCCEEDED
        assert seen_by(control, "second")["job"] == first.handle["job_id"]
    finally:
        await service.close()
    state = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", first.handle["job_id"], "-o", "%T")
    assert state.stdout.strip() == "COMPLETED"  # released at the end: the worker exited by itself


async def test_a_restarted_manager_adopts_the_worker_and_its_running_trial(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    context = slurm_context(tmp_path / "exp", tmp_path / "shared", reuse_mode=True)
    before = SlurmTrainingService(context)
    await before.start()
    running = await submitted(before, trial_spec("kept", hold_command(control), code_dir))
    await wait_for_file(control / "kept.json")
    await before.close(kill_trials=False)  # the manager went away; the worker and its trial run on

    after = SlurmTrainingService(context)
    await after.start()
    try:
        await after.adopt("kept", running.handle, {})
        again = await submitted(
            after, trial_spec("kept", hold_command(control), code_dir)
        )  # submit is idempotent
        assert again.handle == running.handle
        (control / "release").touch()
        ended = (await poll_until(after, lambda s: "kept" in s.ended)).ended["kept"]
        assert ended.status is TrialStatus.SUCCEEDED
        assert len(list(control.glob("kept*.json"))) == 1  # it ran once
        (control / "release").unlink()
        nxt = await submitted(after, trial_spec("next", hold_command(control), code_dir))
        assert nxt.handle["job_id"] == running.handle["job_id"]  # the adopted worker takes it
        await wait_for_file(control / "next.json")
        (control / "release").touch()
        assert (await poll_until(after, lambda s: "next" in s.ended)).ended[
            "next"
        ].status is TrialStatus.SUCCEEDED
    finally:
        await after.close()


async def test_a_restarted_manager_gives_the_next_trial_to_an_idle_worker(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    """No live trial names the worker after the restart: it is found in the experiment's record of its
    workers, and takes the next trial instead of a new job."""
    context = slurm_context(tmp_path / "exp", tmp_path / "shared", reuse_mode=True)
    before = SlurmTrainingService(context)
    await before.start()
    (control / "release").touch()
    try:
        first = await submitted(before, trial_spec("first", hold_command(control), code_dir))
        seen = await poll_until(before, lambda s: "first" in s.ended)
        assert seen.ended["first"].status is TrialStatus.SUCCEEDED
    finally:
        await before.close(kill_trials=False)  # the manager went away between two trials: its worker is idle

    after = SlurmTrainingService(context)
    await after.start()
    try:
        nxt = await submitted(after, trial_spec("next", hold_command(control), code_dir))
        assert nxt.handle["job_id"] == first.handle["job_id"]
        seen = await poll_until(after, lambda s: "next" in s.ended)
        assert seen.ended["next"].status is TrialStatus.SUCCEEDED
        assert seen_by(control, "next")["job"] == first.handle["job_id"] and after.fleet is not None
        assert after.fleet.started_jobs == 0
    finally:
        await after.close()


async def test_a_worker_killed_mid_trial_fails_its_trial_as_infrastructure(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    service = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path / "shared", reuse_mode=True))
    await service.start()
    try:
        job = await submitted(service, trial_spec("victim", hold_command(control), code_dir))
        await wait_for_file(control / "victim.json")
        worker_dir = Path(job.handle["worker_dir"])
        worker_pid = json.loads((worker_dir / "worker.json").read_text())["pid"]
        os.kill(worker_pid, signal.SIGKILL)  # the worker dies; Slurm ends the job's other processes
        ended = (await poll_until(service, lambda s: "victim" in s.ended)).ended["victim"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        assert ended.message is not None and "worker job ended" in ended.message
        retry = await submitted(service, trial_spec("victim", hold_command(control), code_dir, attempt=1))
        assert retry.handle["job_id"] != job.handle["job_id"]  # a new worker: the dead one takes nothing
        await wait_for_file(control / "victim.json")
        (control / "release").touch()
        assert (await poll_until(service, lambda s: "victim" in s.ended)).ended["victim"].status is (
            TrialStatus.SUCCEEDED
        )
    finally:
        await service.close()


async def test_two_trials_share_a_worker_gpu_with_max_trial_number_per_gpu(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    context = slurm_context(
        tmp_path / "exp", tmp_path / "shared", reuse_mode=True, trial_gpu_number=1, max_trial_number_per_gpu=2
    )
    service = SlurmTrainingService(context)
    await service.start()
    try:
        a = await submitted(service, trial_spec("gpuA", hold_command(control), code_dir, gpu_number=1))
        b = await submitted(service, trial_spec("gpuB", hold_command(control), code_dir, gpu_number=1))
        c = await submitted(service, trial_spec("gpuC", hold_command(control), code_dir, gpu_number=1))
        assert a.handle["job_id"] == b.handle["job_id"] != c.handle["job_id"]  # two slots per worker
        for name in ("gpuA", "gpuB", "gpuC"):
            await wait_for_file(control / f"{name}.json")
        assert (
            seen_by(control, "gpuA")["cuda"]
            == seen_by(control, "gpuB")["cuda"]
            != seen_by(control, "gpuC")["cuda"]
        )
        (control / "release").touch()
        seen = await poll_until(service, lambda s: {"gpuA", "gpuB", "gpuC"} <= s.ended.keys())
        assert {e.status for e in seen.ended.values()} == {TrialStatus.SUCCEEDED}
    finally:
        await service.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()
