"""OpenPAI jobs through the service, with the emulator's faults: rate limits, transient errors, a job not yet
visible after its creation, a full virtual cluster, a job stopped or lost outside trialfleet, a job that fails
before the keeper starts, a storage not mounted here, a keeper of another protocol; and the batched status reads.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openpai_helpers import openpai_context, submitted, trial_spec, wait_for

from tests.emulators.openpai import OpenPAIEmulator
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import Seen, poll_until
from trialfleet.training_services import trial_dir
from trialfleet.training_services.events import TrialWaiting
from trialfleet.training_services.openpai import OpenpaiTrainingService
from trialfleet.training_services.openpai.client import OpenpaiClient
from trialfleet.training_services.openpai.watcher import JobWatcher
from trialfleet.training_services.spec import Deferred, Submitted

PYTHON = sys.executable
HOLD = f"{PYTHON} -c 'import os, time\nwhile os.path.exists(\"/mnt/confignfs/hold\"): time.sleep(0.05)'"


class Started:
    """Services started by a test, all closed (their trials killed) at its end."""

    def __init__(self, pai: OpenPAIEmulator, tmp_path: Path) -> None:
        self.pai, self.tmp_path = pai, tmp_path
        self.open: list[OpenpaiTrainingService] = []
        self.code = tmp_path / "code"
        self.code.mkdir(exist_ok=True)

    async def start(self, **overrides: Any) -> OpenpaiTrainingService:
        service = OpenpaiTrainingService(openpai_context(self.pai, self.tmp_path / "experiment", **overrides))
        service.client.backoff = 0.05
        service.watcher.min_interval = 0.2
        await service.start()
        self.open.append(service)
        return service

    async def close(self, service: OpenpaiTrainingService, *, kill_trials: bool) -> None:
        self.open.remove(service)
        await service.close(kill_trials=kill_trials)


@pytest.fixture
async def started(pai: OpenPAIEmulator, tmp_path: Path) -> AsyncIterator[Started]:
    pool = Started(pai, tmp_path)
    yield pool
    for service in pool.open:
        await service.close(kill_trials=True)


def posts(pai: OpenPAIEmulator) -> list[int]:
    return [r["status"] for r in pai.requests if r["method"] == "POST" and r["path"].endswith("/jobs")]


async def test_submissions_over_openpai_s_hourly_limit_wait_with_the_reason(
    pai: OpenPAIEmulator, started: Started
) -> None:
    pai.set_limits(submit_job_per_hour=1)
    service = await started.start()
    await submitted(service, trial_spec("first", "exit 0", started.code))
    deferred = await service.submit(trial_spec("second", "exit 0", started.code))
    assert isinstance(deferred, Deferred)
    assert deferred.reason.startswith(
        "OpenPAI's job submission limit is reached (HTTP 429, alice); it resets at "
    )
    again = await service.submit(trial_spec("second", "exit 0", started.code))
    assert again == deferred and posts(pai) == [202, 429]  # no new request until the window passes
    pai.set_limits(submit_job_per_hour=0)
    service.submit_retry_interval = 0.0  # try again now rather than in a minute
    await service.submit(
        trial_spec("third", "exit 0", started.code)
    )  # still blocked: the next try is due now
    second = await submitted(service, trial_spec("second", "exit 0", started.code))
    assert second.handle["job"] == "nni_exp_contract_trial_second" and posts(pai)[-1] == 202
    seen = await poll_until(service, lambda s: {"first", "second"} <= set(s.ended))
    assert {seen.ended[t].status for t in ("first", "second")} == {TrialStatus.SUCCEEDED}


async def test_transient_server_errors_are_retried(pai: OpenPAIEmulator, started: Started) -> None:
    service = await started.start()
    pai.fail_next(2, 503, "POST", "/jobs$")
    pai.fail_next(3, 502, "GET", "/jobs$")  # the job list: the watcher logs it and asks again later
    await submitted(service, trial_spec("flaky", "echo done", started.code))
    assert posts(pai) == [503, 503, 202]
    seen = await poll_until(service, lambda s: "flaky" in s.ended)
    assert seen.ended["flaky"].status is TrialStatus.SUCCEEDED


async def test_a_resubmitted_attempt_finds_its_job_even_before_openpai_shows_it(
    pai: OpenPAIEmulator, started: Started
) -> None:
    """A manager killed after posting a job submits the attempt again; the job is not visible yet (404 right
    after creation) and cannot start (the virtual cluster is full): OpenPAI's 409 tells it exists."""
    pai.set_capacity("default", cpu=0, memory=0, gpu=0)
    pai.hide_next_jobs(gets=3)
    first = await started.start()
    spec = trial_spec("again", "echo ran >> runs.log", started.code)
    await submitted(first, spec)
    await started.close(first, kill_trials=False)
    second = await started.start()
    handle = (await submitted(second, spec)).handle
    assert posts(pai) == [202, 409]
    pai.set_capacity("default", cpu=8, memory=16384, gpu=0)
    seen = await poll_until(second, lambda s: "again" in s.ended)
    assert seen.ended["again"].status is TrialStatus.SUCCEEDED
    assert (Path(handle["trial_dir"]).parent.parent / "code").exists()
    assert len([fw for fw in pai.cluster.frameworks if fw.endswith("_trial_again")]) == 1


async def test_a_full_virtual_cluster_keeps_trials_waiting_with_the_reason(
    pai: OpenPAIEmulator, started: Started
) -> None:
    pai.set_capacity("default", cpu=1, memory=16384, gpu=0)
    hold = started.tmp_path / "nfs" / "hold"
    hold.touch()
    service = await started.start()
    await submitted(service, trial_spec("runs", HOLD, started.code))
    await submitted(service, trial_spec("waits", "echo ok", started.code))
    await submitted(service, trial_spec("canceled", "echo never", started.code))
    seen, waits = Seen(), list[TrialWaiting]()
    while not ("runs" in seen.started and {"waits", "canceled"} <= {w.trial_id for w in waits}):
        batch = await service.poll()
        seen.add(batch)
        waits += batch.waiting
        await asyncio.sleep(0.05)
    reasons = {w.reason for w in waits if w.trial_id == "waits"}
    assert reasons == {
        "waiting for resources in virtual cluster default (cpu 1 of 1, memory 1024 of 16384 MB, gpu 0 of 0 in use)"
    }
    await service.cancel("canceled")
    await poll_until(service, lambda s: "canceled" in s.ended, seen)
    ended = seen.ended["canceled"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    assert (
        ended.message is not None and "OpenPAI job nni_exp_contract_trial_canceled STOPPED" in ended.message
    )
    hold.unlink()
    await poll_until(service, lambda s: {"runs", "waits"} <= set(s.ended), seen)
    assert (seen.ended["runs"].status, seen.ended["waits"].status) == (
        TrialStatus.SUCCEEDED,
        TrialStatus.SUCCEEDED,
    )
    assert "waits" in seen.started


async def test_a_job_stopped_outside_trialfleet_is_user_canceled(
    pai: OpenPAIEmulator, started: Started
) -> None:
    service = await started.start()
    handle = (
        await submitted(
            service, trial_spec("stopped", f"{PYTHON} -c 'import time; time.sleep(600)'", started.code)
        )
    ).handle
    await wait_for(lambda: (Path(handle["trial_dir"]) / "keeper.json").exists(), "the keeper to start")
    with httpx.Client(base_url=pai.api, headers=pai.auth_headers("alice")) as http:
        http.put(f"/jobs/alice~{handle['job']}/executionType", json={"value": "STOP"}).raise_for_status()
    ended = (await poll_until(service, lambda s: "stopped" in s.ended)).ended["stopped"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    assert (
        ended.message
        == "stopped outside trialfleet (OpenPAI job nni_exp_contract_trial_stopped STOPPED, exit code -210 (StopFrameworkRequested))"
    )


async def test_a_job_openpai_lost_is_reported_lost(pai: OpenPAIEmulator, started: Started) -> None:
    service = await started.start()
    service.watcher.gone_after = 0.5
    handle = (
        await submitted(
            service, trial_spec("vanishes", f"{PYTHON} -c 'import time; time.sleep(600)'", started.code)
        )
    ).handle
    await wait_for(lambda: (Path(handle["trial_dir"]) / "keeper.json").exists(), "the keeper to start")
    pai.lose_job(f"alice~{handle['job']}")
    ended = (await poll_until(service, lambda s: "vanishes" in s.ended)).ended["vanishes"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    # the keeper may have had the time to record the SIGTERM of its pod's deletion, or not
    assert ended.message in (
        "lost: OpenPAI no longer knows the job and the trial keeper left no final record",
        "lost: OpenPAI no longer knows the job and its trial keeper was ended from outside (canceled)",
    )


async def test_a_job_that_fails_before_the_keeper_starts_says_why_and_keeps_its_log(
    pai: OpenPAIEmulator, started: Started
) -> None:
    protocol = {
        "protocolVersion": 2,
        "name": "setup_fails",
        "type": "job",
        "taskRoles": {"main": {"dockerImage": "img", "commands": ["unused"]}},
        "deployments": [
            {
                "name": "setup",
                "taskRoles": {"main": {"preCommands": ["echo 'conda: env nni not found' >&2", "exit 7"]}},
            }
        ],
        "defaults": {"deployment": "setup"},
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "python:3.11"}],
    }
    service = await started.start(openpaiConfig=protocol)
    handle = (await submitted(service, trial_spec("setup", "unused", started.code))).handle
    ended = (await poll_until(service, lambda s: "setup" in s.ended)).ended["setup"]
    assert (ended.status, ended.failure_kind, ended.exit_code) == (
        TrialStatus.FAILED,
        FailureKind.INFRASTRUCTURE,
        7,
    )
    assert ended.message == (
        "the job failed (OpenPAI job nni_exp_contract_trial_setup FAILED, exit code 255 (PAIRuntimeUnknownFailed), "
        "command's exit code 7); before the trial keeper started: conda: env nni not found"
    )
    log = (Path(handle["trial_dir"]) / "openpai.log").read_text()
    assert "conda: env nni not found" in log
    assert (await service.read_trial_file("setup", handle, "openpai.log")).decode() == log


async def test_a_storage_not_mounted_here_fails_the_trial_with_the_reason(
    pai: OpenPAIEmulator, started: Started, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "not-the-storage"
    elsewhere.mkdir()
    service = await started.start(localStorageMountPoint=str(elsewhere))
    await submitted(service, trial_spec("nowhere", "echo hi", started.code))
    ended = (await poll_until(service, lambda s: "nowhere" in s.ended)).ended["nowhere"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.USER_CODE)
    assert ended.message is not None and ended.message.startswith(
        "the job's task found no trial directory on the storage"
    )
    assert ended.message.endswith(
        "trialfleet: /mnt/confignfs/contract/trials/nowhere/openpai-task.sh is not on storage confignfs in this "
        "container (mounted at /mnt/confignfs): is this storage mounted at localStorageMountPoint where the manager runs?"
    )


async def test_a_keeper_of_another_protocol_refuses_the_trial_visibly(
    pai: OpenPAIEmulator, started: Started, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trial_dir, "KEEPER_PROTOCOL", trial_dir.KEEPER_PROTOCOL + 1)  # a newer manager's
    service = await started.start()
    await submitted(service, trial_spec("mismatch", "echo never", started.code))
    ended = (await poll_until(service, lambda s: "mismatch" in s.ended)).ended["mismatch"]
    assert (ended.status, ended.exit_code) == (TrialStatus.FAILED, None)
    wanted = trial_dir.KEEPER_PROTOCOL
    assert ended.message == (
        f"keeper error: command.json has protocol {wanted}, this keeper speaks {wanted - 1}; "
        "the manager and the keeper on this worker are of different trialfleet versions"
    )


async def test_status_is_read_with_one_job_list_call_per_query(
    pai: OpenPAIEmulator, started: Started
) -> None:
    hold = started.tmp_path / "nfs" / "hold"
    hold.touch()
    service = await started.start()
    names = [f"batch{i}" for i in range(4)]
    for name in names:
        await submitted(service, trial_spec(name, HOLD, started.code))
    seen = await poll_until(service, lambda s: set(names) <= set(s.started))
    pai.clear_requests()
    polls = 0
    while polls < 10 or not any(r["path"].endswith("/jobs") for r in pai.requests):
        seen.add(await service.poll())
        polls += 1
    hold.unlink()
    await poll_until(service, lambda s: set(names) <= set(s.ended), seen)
    gets = [r for r in pai.requests if r["method"] == "GET"]
    lists = [r for r in gets if r["path"].endswith("/jobs")]
    details = [r for r in gets if "/jobs/" in r["path"]]
    assert lists and all(r["query"]["keyword"] == "nni_exp_contract_trial_" for r in lists)
    assert len(lists) <= polls  # one list call per due query, whatever the number of trials
    # no job is asked about on its own while it runs: at most once, if it ended before its result.json was seen
    asked = Counter(r["path"] for r in details)
    assert all(count == 1 for count in asked.values()), asked
    assert {seen.ended[name].status for name in names} == {TrialStatus.SUCCEEDED}


async def test_submit_waits_while_openpai_refuses_the_token(pai: OpenPAIEmulator, started: Started) -> None:
    service = await started.start()
    pai.expire_token(user="alice")
    deferred = await service.submit(trial_spec("later", "echo hi", started.code))
    assert isinstance(deferred, Deferred)
    assert (
        "OpenPAI cannot take the job now" in deferred.reason and "Your token is invalid." in deferred.reason
    )
    assert not isinstance(deferred, Submitted)


async def test_the_watcher_never_lists_jobs_more_often_than_its_interval(pai: OpenPAIEmulator) -> None:
    """OpenPAI allows 60 job lists a minute per user: hurrying (a cancel, a trial about to end) brings the next
    query forward, never closer than min_interval to the last one."""
    client = OpenpaiClient(pai.url, "alice", pai.token("alice"))
    now = [100.0]
    watcher = JobWatcher(client, "nni_exp_e_trial_", min_interval=2.0, clock=lambda: now[0])
    watcher.watch("nni_exp_e_trial_a")

    def lists() -> int:
        return len([r for r in pai.requests if r["method"] == "GET" and r["path"].endswith("/jobs")])

    try:
        for _ in range(5):
            watcher.hurry()
            await watcher.refresh()
        assert lists() == 1
        now[0] += 1.9
        watcher.hurry()
        await watcher.refresh()
        assert lists() == 1
        now[0] += 0.1
        await watcher.refresh()
        assert lists() == 2
    finally:
        await client.close()


async def test_an_application_token_is_sent_as_openpai_asks(pai: OpenPAIEmulator, started: Started) -> None:
    token = pai.tokens.issue("alice", application=True)
    service = await started.start(token=token)
    await submitted(service, trial_spec("app", "echo ok", started.code))
    ended = (await poll_until(service, lambda s: "app" in s.ended)).ended["app"]
    assert ended.status is TrialStatus.SUCCEEDED
    schemes = {
        r["headers"]["Authorization"].split()[0] for r in pai.requests if "Authorization" in r["headers"]
    }
    assert schemes == {"Basic"}


@pytest.mark.parametrize("keeper_told", [True, False], ids=["keeper-told", "keeper-killed"])
async def test_a_reporting_role_stopped_by_another_role_s_success_is_not_succeeded(
    pai: OpenPAIEmulator, started: Started, keeper_told: bool
) -> None:
    """Two task roles: ``ps`` finishes at once and, by its completion policy, OpenPAI ends the job as SUCCEEDED,
    stopping the reporting ``worker`` before its command ran to its end. Whether the worker's keeper is told
    (SIGTERM, and it records the cut) or killed at once without a record (the runtime, the container's first
    process, ends on the SIGTERM and takes the keeper down), the trial is not SUCCEEDED, and says so without
    waiting the minute a single-task job's success would give result.json to show up."""
    pai.kill_deleted_pods(not keeper_told)
    protocol = {
        "protocolVersion": 2,
        "name": "two_roles",
        "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "python:3.11"}],
        "taskRoles": {
            "worker": {"dockerImage": "img", "commands": [f"{PYTHON} -c 'import time; time.sleep(60)'"]},
            "ps": {"dockerImage": "img", "commands": ["sleep 1"], "completion": {"minSucceededInstances": 1}},
        },
    }
    service = await started.start(openpaiConfig=protocol)
    await submitted(service, trial_spec("cut", "unused", started.code))
    ended = (await poll_until(service, lambda s: "cut" in s.ended)).ended["cut"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.USER_CODE), ended
    assert ended.message is not None and "yet its job succeeded" in ended.message
