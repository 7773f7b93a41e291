"""What sacct says of jobs Slurm no longer lists, on a cluster with accounting (slurmdbd + MariaDB).

The cluster forgets finished jobs 2 s after they end (MinJobAge; its purge runs every few seconds), so squeue
no longer knows them within ~10 s. Everything is submitted once, at the start of the module, and looked at
once squeue has forgotten it: plain jobs through the job watcher, and trials adopted by a new service, whose
outcome without a result.json (cancelled while pending, ended in the setup script) only sacct can tell.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slurm_cluster import SlurmCluster
from slurm_helpers import slurm_context, submitted, trial_spec

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.slurm import SlurmTrainingService
from trialfleet.training_services.slurm.runner import LocalCommandRunner
from trialfleet.training_services.slurm.status import JobWatcher, SlurmJob

pytestmark = pytest.mark.slurm

FORGET_GUARD = 120.0  # MinJobAge plus slurmctld's purge cycle on a loaded machine
PLAIN_JOBS = {  # name: (sbatch arguments, what sacct must say once squeue forgot the job)
    "failed": (["--wrap", "exit 3"], SlurmJob("", "FAILED", None, 3, None)),
    "completed": (["--wrap", "true"], SlurmJob("", "COMPLETED", None, 0, None)),
    "killed": (["--wrap", "kill -9 $$"], SlurmJob("", "FAILED", None, None, 9)),
    "held": (["--begin=now+1hour", "--wrap", "true"], SlurmJob("", "CANCELLED", None, 0, None)),
}


@dataclass(frozen=True)
class Forgotten:
    """Jobs and trials that ended and that squeue no longer lists."""

    jobs: dict[str, str]  # name → job id
    handles: dict[str, dict[str, Any]]  # trial id → handle
    context_options: dict[str, Any]


def runner(cluster: SlurmCluster) -> LocalCommandRunner:
    return LocalCommandRunner(cluster.env)


@pytest.fixture(scope="module")
def forgotten(accounting_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Forgotten:
    directory = tmp_path_factory.mktemp("forgotten")
    (directory / "code").mkdir()
    jobs = {}
    for name, (arguments, _) in PLAIN_JOBS.items():
        done = accounting_cluster.run("sbatch", "--parsable", "--output=/dev/null", *arguments)
        jobs[name] = done.stdout.strip()
    accounting_cluster.run("scancel", jobs["held"])
    options = {"shared_directory": directory / "shared"}
    handles = asyncio.run(submit_trials(accounting_cluster, directory, options))
    wait_until_forgotten(accounting_cluster, [*jobs.values(), *(h["job_id"] for h in handles.values())])
    return Forgotten(jobs, handles, options)


async def submit_trials(cluster: SlurmCluster, directory: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Three trials, left behind by services closed without killing them (a manager that went away)."""
    code = directory / "code"
    cases = {
        "early": {"setup_script": "exit 7"},  # ends before the keeper starts: no result.json
        "held": {"sbatch_options": ["--begin=now+1hour"]},  # cancelled from outside while pending
        "ok": {},  # ends by itself: result.json decides
    }
    handles = {}
    for trial_id, extra in cases.items():
        context = slurm_context(directory / "experiment", options["shared_directory"], **extra)
        service = SlurmTrainingService(context, runner=runner(cluster))
        await service.start()
        command = f"{shlex.quote(sys.executable)} -c 'print(1)'"
        handles[trial_id] = dict((await submitted(service, trial_spec(trial_id, command, code))).handle)
        await service.close(kill_trials=False)
    cluster.run("scancel", handles["held"]["job_id"])
    return handles


def wait_until_forgotten(cluster: SlurmCluster, job_ids: list[str]) -> None:
    deadline = time.monotonic() + FORGET_GUARD
    while time.monotonic() < deadline:
        listed = cluster.run(
            "squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}", check=False
        )
        if listed.returncode != 0 or not listed.stdout.strip():  # "Invalid job id" once all are purged
            return
        time.sleep(0.5)
    raise AssertionError(f"stuck: squeue still lists some of the jobs {job_ids} after {FORGET_GUARD:g}s")


async def test_sacct_gives_the_final_state_and_exit_code_of_jobs_squeue_forgot(
    accounting_cluster: SlurmCluster, forgotten: Forgotten
) -> None:
    ids = forgotten.jobs
    with_sacct = await JobWatcher(runner(accounting_cluster), use_sacct=True).query(ids.values())
    assert {name: with_sacct.get(job_id) for name, job_id in ids.items()} == {
        name: SlurmJob(ids[name], expected.state, expected.reason, expected.exit_code, expected.signal)
        for name, (_, expected) in PLAIN_JOBS.items()
    }
    assert with_sacct[ids["held"]].meaning.status is TrialStatus.USER_CANCELED
    assert with_sacct[ids["killed"]].describe() == f"Slurm job {ids['killed']} FAILED, signal 9"
    without = await JobWatcher(runner(accounting_cluster), use_sacct=False).query(ids.values())
    assert without == {}  # squeue alone knows none of them any more


async def test_trials_that_ended_unwatched_are_told_apart_by_sacct(
    tmp_path: Path, accounting_cluster: SlurmCluster, forgotten: Forgotten
) -> None:
    shared = forgotten.context_options["shared_directory"]
    service = SlurmTrainingService(slurm_context(tmp_path, shared), runner=runner(accounting_cluster))
    await service.start()
    try:
        assert service.watcher.use_sacct  # chosen by itself: the cluster has accounting
        for trial_id, handle in forgotten.handles.items():
            await service.adopt(trial_id, handle, {})
        ended = (await poll_until(service, lambda s: len(s.ended) == 3)).ended
    finally:
        await service.close()
    early, held, ok = ended["early"], ended["held"], ended["ok"]
    assert (early.status, early.exit_code, early.failure_kind) == (
        TrialStatus.FAILED,
        7,
        FailureKind.USER_CODE,
    )
    assert early.message is not None and "before the trial keeper started" in early.message
    assert (held.status, held.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    assert held.message is not None and "outside trialfleet" in held.message
    assert (ok.status, ok.exit_code) == (TrialStatus.SUCCEEDED, 0)


async def test_without_sacct_the_same_trials_are_lost(
    tmp_path: Path, accounting_cluster: SlurmCluster, forgotten: Forgotten
) -> None:
    shared = forgotten.context_options["shared_directory"]
    context = slurm_context(tmp_path, shared, use_sacct=False)
    service = SlurmTrainingService(context, runner=runner(accounting_cluster))
    await service.start()
    try:
        for trial_id in ("early", "held"):
            await service.adopt(trial_id, forgotten.handles[trial_id], {})
        ended = (await poll_until(service, lambda s: len(s.ended) == 2)).ended
    finally:
        await service.close()
    for outcome in ended.values():
        assert (outcome.status, outcome.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        assert outcome.message is not None and outcome.message.startswith("lost: the Slurm job is gone")
