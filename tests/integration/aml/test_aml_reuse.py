"""Reuse mode on the Azure ML emulator (NNI's AML mode, the default): trials run one after another in one worker
job, each shipped through an MLflow run of its own nested under the job's; the worker's mailbox is a tag of the
job's run. A cancelled trial leaves its worker running, a worker whose node is lost fails its trial as an
infrastructure failure (retried in a new worker), a restarted manager re-adopts a worker and its running trial
(run once, metrics once) and gives its next trial to that worker, an idle worker is released, and two GPU trials
share one worker with ``maxTrialNumberPerGpu: 2``."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aml_helpers import aml_config, worker_dir, worker_trial_dir

from tests.emulators.aml import AmlEmulator
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import make_context, poll_until, wait_for_file
from trialfleet.training_services.aml import AmlTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {"x": 1}})


def report(trial_id: str, value: str) -> str:
    """A command that reports ``value`` as the trial's final metric through the metric stream."""
    code = (
        "import json, os; m = open(os.path.join(os.environ['NNI_SYS_DIR'], '.nni', 'metrics'), 'ab'); "
        f"p = json.dumps({{'parameter_id': 1, 'trial_job_id': '{trial_id}', 'type': 'FINAL', 'sequence': 0, "
        f"'value': '{value}'}}); m.write(b'ME%06d' % (len(p) + 1) + p.encode() + b'\\n')"
    )
    return f'python3 -c "{code}"'


def spec(tmp_path: Path, trial_id: str, command: str, attempt: int = 0, gpus: int | None = None) -> TrialSpec:
    code_dir = tmp_path / "code"
    code_dir.mkdir(exist_ok=True)
    return TrialSpec(trial_id, 0, command, code_dir, RECORD, attempt=attempt, gpu_number=gpus)


def service_of(tmp_path: Path, aml: AmlEmulator, **options: Any) -> AmlTrainingService:
    config = aml_config(aml, reuseMode=True, **options)
    return AmlTrainingService(make_context(tmp_path / "experiment", config, "exp1"))


@contextlib.asynccontextmanager
async def running(tmp_path: Path, aml: AmlEmulator, **options: Any) -> AsyncIterator[AmlTrainingService]:
    service = service_of(tmp_path, aml, **options)
    await service.start()
    try:
        yield service
    finally:
        await service.close()


async def submit(service: AmlTrainingService, trial: TrialSpec) -> Submitted:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    return submitted


def job_submits(aml: AmlEmulator) -> int:
    return sum(1 for r in aml.requests() if r.method == "PUT" and "/jobs/" in r.path)


async def test_trials_run_one_after_another_in_one_worker_job(tmp_path: Path, aml: AmlEmulator) -> None:
    async with running(tmp_path, aml) as service:
        handles = []
        for n in range(3):
            handles.append((await submit(service, spec(tmp_path, f"t{n}", report(f"t{n}", str(n))))).handle)
            seen = await poll_until(service, lambda s, n=n: f"t{n}" in s.ended)
            assert seen.ended[f"t{n}"].status is TrialStatus.SUCCEEDED
            assert [(m.trial_id, m.data) for m in seen.metrics] == [(f"t{n}", str(n))]
    jobs = {h["job_name"] for h in handles}
    assert len(jobs) == 1 and job_submits(aml) == 1
    (job,) = jobs
    assert job.startswith("nni_exp_exp1_worker_")
    runs = [h["run_id"] for h in handles]
    assert len(set(runs)) == 3 and job not in runs
    for run in runs:  # each attempt's run is a child of its worker job's run, and was ended by the worker
        assert aml.mlflow.runs[run].tags["mlflow.parentRunId"] == job
        assert aml.mlflow.created[run].status == "FINISHED"
    ended = json.loads((worker_dir(aml, job) / "worker" / "ended.json").read_text())
    assert ended["reason"] == "released by the manager"


async def test_a_cancelled_trial_leaves_its_worker_running_for_the_next(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    async with running(tmp_path, aml) as service:
        held = await submit(service, spec(tmp_path, "held", "sleep 600"))
        await poll_until(service, lambda s: "held" in s.started)
        await service.cancel("held")
        ended = (await poll_until(service, lambda s: "held" in s.ended)).ended["held"]
        assert ended.status is TrialStatus.USER_CANCELED
        assert aml.job(held.handle["job_name"]).status == "Running"
        after = await submit(service, spec(tmp_path, "after", report("after", "1")))
        assert after.handle["job_name"] == held.handle["job_name"]
        seen = await poll_until(service, lambda s: "after" in s.ended)
        assert seen.ended["after"].status is TrialStatus.SUCCEEDED
        assert job_submits(aml) == 1


async def test_a_worker_whose_node_is_lost_fails_its_trial_for_a_retry_in_a_new_worker(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    async with running(tmp_path, aml) as service:
        first = await submit(service, spec(tmp_path, "lost", "sleep 600"))
        await poll_until(service, lambda s: "lost" in s.started)
        aml.force_status(first.handle["job_name"], "NotResponding")
        ended = (await poll_until(service, lambda s: "lost" in s.ended)).ended["lost"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        retry = await submit(service, spec(tmp_path, "lost", report("lost", "2"), attempt=1))
        assert retry.handle["job_name"] != first.handle["job_name"]
        seen = await poll_until(service, lambda s: "lost" in s.ended)
        assert seen.ended["lost"].status is TrialStatus.SUCCEEDED
        assert [m.data for m in seen.metrics] == ["2"]


async def test_a_restarted_manager_readopts_the_worker_and_its_running_trial(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    """The running trial is submitted again (its handle found in assigned.json) and adopted: it runs once, its
    metric arrives once, and the next trial goes to the same worker job."""
    command = f"while [ ! -e go ]; do sleep 0.05; done; {report('long', '7')}"
    first = service_of(tmp_path, aml)
    await first.start()
    try:
        job = await submit(first, spec(tmp_path, "long", command))
        await poll_until(first, lambda s: "long" in s.started)
    finally:
        await first.close(kill_trials=False)  # the manager goes away; its worker and trial run on
    restarted = service_of(tmp_path, aml)
    await restarted.start()
    try:
        again = await submit(restarted, spec(tmp_path, "long", command))
        assert again.handle == job.handle
        (aml.root / "jobs" / job.handle["job_name"] / "wd" / "go").touch()
        seen = await poll_until(restarted, lambda s: "long" in s.ended)
        assert seen.ended["long"].status is TrialStatus.SUCCEEDED
        assert [m.data for m in seen.metrics] == ["7"]
        runs = json.loads((worker_trial_dir(aml, job.handle) / "keeper.json").read_text())
        assert runs["keeper_pid"]  # one keeper: the attempt was claimed once
        claimed = worker_dir(aml, job.handle["job_name"]) / "worker" / "claimed"
        assert sorted(p.name for p in claimed.iterdir()) == ["long"]
        nxt = await submit(restarted, spec(tmp_path, "next", report("next", "1")))
        assert nxt.handle["job_name"] == job.handle["job_name"]
        await poll_until(restarted, lambda s: "next" in s.ended)
        assert job_submits(aml) == 1
    finally:
        await restarted.close()


async def test_a_restarted_manager_gives_the_next_trial_to_the_idle_worker_of_the_last(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    """No trial names the idle worker any more: it is found in the experiment's record of its workers."""
    first = service_of(tmp_path, aml)
    await first.start()
    try:
        job = await submit(first, spec(tmp_path, "t0", "true"))
        await poll_until(first, lambda s: "t0" in s.ended)
    finally:
        await first.close(kill_trials=False)
    restarted = service_of(tmp_path, aml)
    await restarted.start()
    try:
        again = await submit(restarted, spec(tmp_path, "t1", "true"))
        assert (again.handle["worker"], again.handle["job_name"]) == (
            job.handle["worker"],
            job.handle["job_name"],
        )
        ended = (await poll_until(restarted, lambda s: "t1" in s.ended)).ended["t1"]
        assert ended.status is TrialStatus.SUCCEEDED
        assert job_submits(aml) == 1
    finally:
        await restarted.close()


async def test_an_idle_worker_is_released_and_its_job_ends(tmp_path: Path, aml: AmlEmulator) -> None:
    """Two workers (one trial each); the one whose trial ended is released after workerIdleTimeout while the
    other runs on: its stop request goes through its mailbox, and its job completes."""
    async with running(tmp_path, aml, workerIdleTimeout=1) as service:
        quick = await submit(service, spec(tmp_path, "quick", "true"))
        held = await submit(service, spec(tmp_path, "held", "sleep 600"))
        name = quick.handle["job_name"]
        assert held.handle["job_name"] != name
        await poll_until(service, lambda s: "quick" in s.ended)
        while not aml.job(name).terminal:  # polls go on for the held trial meanwhile
            await service.poll()
            await asyncio.sleep(0.1)
        ended = json.loads((worker_dir(aml, name) / "worker" / "ended.json").read_text())
        assert ended["reason"] == "released by the manager"
        assert aml.job(name).status == "Completed"
        assert aml.mlflow.runs[name].tags["trialfleet.worker.ended"] == "released by the manager"
        assert aml.job(held.handle["job_name"]).status == "Running"


async def test_two_gpu_trials_share_one_worker_with_two_trials_per_gpu(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    async with running(tmp_path, aml, trialGpuNumber=1, maxTrialNumberPerGpu=2) as service:
        command = "while [ ! -e go ]; do sleep 0.05; done"
        a = await submit(service, spec(tmp_path, "a", command, gpus=1))
        b = await submit(service, spec(tmp_path, "b", command, gpus=1))
        assert a.handle["job_name"] == b.handle["job_name"]
        for handle in (a.handle, b.handle):  # both run at once in the one worker
            await wait_for_file(worker_trial_dir(aml, handle) / "keeper.json")
        (aml.root / "jobs" / a.handle["job_name"] / "wd" / "go").touch()
        seen = await poll_until(service, lambda s: {"a", "b"} <= set(s.ended))
        assert {seen.ended[t].status for t in "ab"} == {TrialStatus.SUCCEEDED}
        assert job_submits(aml) == 1
