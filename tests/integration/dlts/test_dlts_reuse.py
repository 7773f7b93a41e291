"""Reuse mode on the DLTS emulator: trials run one after another in one worker job, and a worker job that DLTS
preempts (its pod deleted, the job queued again) fails the trial it ran as an infrastructure failure."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from dlts_helpers import dlts_config

from tests.emulators.dlts import DltsEmulator
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import make_context, poll_until, wait_for_file
from trialfleet.training_services.dlts import DltsTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {"x": 1}})


def spec(tmp_path: Path, trial_id: str, command: str, attempt: int = 0) -> TrialSpec:
    code_dir = tmp_path / "code"
    code_dir.mkdir(exist_ok=True)
    return TrialSpec(trial_id, 0, command, code_dir, RECORD, attempt=attempt)


async def submit(service: DltsTrainingService, trial: TrialSpec) -> Submitted:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    return submitted


def submits(dlts: DltsEmulator) -> int:
    return sum(1 for r in dlts.requests if r["method"] == "POST" and r["path"].endswith("/jobs"))


async def test_trials_run_one_after_another_in_one_worker_job(tmp_path: Path, dlts: DltsEmulator) -> None:
    config = dlts_config(dlts, reuseMode=True, preemptionAllowed=True)
    service = DltsTrainingService(make_context(tmp_path / "experiment", config, "exp1"))
    await service.start()
    try:
        jobs = set()
        for n in range(3):
            job = await submit(service, spec(tmp_path, f"t{n}", "echo ok"))
            jobs.add(job.handle["job_id"])
            ended = (await poll_until(service, lambda s, n=n: f"t{n}" in s.ended)).ended[f"t{n}"]
            assert ended.status is TrialStatus.SUCCEEDED
        assert len(jobs) == 1 and submits(dlts) == 1
        (job_id,) = jobs
        assert dlts.job(job_id)["jobParams"]["jobName"].startswith("nni_exp_exp1_worker_")
    finally:
        await service.close()


async def test_a_preempted_worker_fails_its_running_trial_for_a_retry(
    tmp_path: Path, dlts: DltsEmulator
) -> None:
    config = dlts_config(dlts, reuseMode=True, preemptionAllowed=True)
    service = DltsTrainingService(make_context(tmp_path / "experiment", config, "exp1"))
    await service.start()
    hold = dlts.work_dir() / "hold"
    hold.touch()
    try:
        command = "while [ -e /work/hold ]; do sleep 0.05; done"
        job = await submit(service, spec(tmp_path, "held", command))
        trial_dir = dlts.work_dir() / Path(job.handle["trial_dir"]).relative_to("/work")
        await wait_for_file(trial_dir / "keeper.json")
        dlts.preempt(job.handle["job_id"])
        ended = (await poll_until(service, lambda s: "held" in s.ended)).ended["held"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        hold.unlink()
        retry = await submit(service, spec(tmp_path, "held", "echo again", attempt=1))
        seen = await poll_until(service, lambda s: "held" in s.ended)
        assert seen.ended["held"].status is TrialStatus.SUCCEEDED
        assert retry.handle["trial_dir"] != job.handle["trial_dir"]
    finally:
        await service.close()


async def test_a_restarted_manager_gives_the_next_trial_to_the_idle_worker_of_the_last(
    tmp_path: Path, dlts: DltsEmulator
) -> None:
    """No trial names the idle worker any more: it is found in the experiment's record of its workers."""
    config = dlts_config(dlts, reuseMode=True)
    context = make_context(tmp_path / "experiment", config, "exp1")
    first = DltsTrainingService(context)
    await first.start()
    try:
        job = await submit(first, spec(tmp_path, "t0", "echo ok"))
        await poll_until(first, lambda s: "t0" in s.ended)
    finally:
        await first.close(kill_trials=False)  # the manager goes away; its worker stays, idle
    restarted = DltsTrainingService(make_context(tmp_path / "experiment", config, "exp1"))
    await restarted.start()
    try:
        again = await submit(restarted, spec(tmp_path, "t1", "echo ok"))
        assert (again.handle["worker"], again.handle["job_id"]) == (job.handle["worker"], job.handle["job_id"])
        ended = (await poll_until(restarted, lambda s: "t1" in s.ended)).ended["t1"]
        assert ended.status is TrialStatus.SUCCEEDED
        assert submits(dlts) == 1
    finally:
        await restarted.close()


async def test_a_restarted_manager_releases_a_worker_idle_for_longer_than_its_timeout(
    tmp_path: Path, dlts: DltsEmulator
) -> None:
    """How long the worker has been idle survives the restart: one idle past workerIdleTimeout is released, not
    given the next trial (it might end itself meanwhile)."""
    config = dlts_config(dlts, reuseMode=True, workerIdleTimeout=1)
    first = DltsTrainingService(make_context(tmp_path / "experiment", config, "exp1"))
    await first.start()
    try:
        job = await submit(first, spec(tmp_path, "t0", "echo ok"))
        await poll_until(first, lambda s: "t0" in s.ended)
        idle_from = time.monotonic()
    finally:
        await first.close(kill_trials=False)
    await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - idle_from)))  # its idle timeout passes meanwhile
    restarted = DltsTrainingService(make_context(tmp_path / "experiment", config, "exp1"))
    await restarted.start()
    try:
        again = await submit(restarted, spec(tmp_path, "t1", "echo ok"))
        assert again.handle["job_id"] != job.handle["job_id"]
        await poll_until(restarted, lambda s: "t1" in s.ended)
        worker_dir = dlts.work_dir() / Path(job.handle["worker_dir"]).relative_to("/work")
        await poll_until(restarted, lambda s: (worker_dir / "ended.json").exists())
        assert json.loads((worker_dir / "ended.json").read_text())["reason"] == "released by the manager"
    finally:
        await restarted.close()
