"""The DLTS service against DLTS's habits, each shown by the emulator: states a client must read one by one,
refusals answered with HTTP 200, jobs DLTS forgets, launcher errors, pauses and preemptions, bad credentials,
an overloaded dashboard, and the job log read with its cursor."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from dlts_helpers import dlts_config

from tests.emulators.dlts import DltsEmulator
from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import Seen, make_context, poll_until
from trialfleet.training_services.dlts import DltsTrainingService
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec

RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {"x": 1}})


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[DltsEmulator]:
    """An emulator whose jobs leave a state only once a client read it: every state must be seen."""
    with DltsEmulator(tmp_path / "nfs", kill_grace=0.2, wait_for_poll=True) as emulator:
        yield emulator


def spec(tmp_path: Path, command: str, trial_id: str = "t1") -> TrialSpec:
    code_dir = tmp_path / "code"
    code_dir.mkdir(exist_ok=True)
    return TrialSpec(trial_id, 0, command, code_dir, RECORD)


async def started_service(tmp_path: Path, dlts: DltsEmulator, **options: object) -> DltsTrainingService:
    service = DltsTrainingService(make_context(tmp_path / "experiment", dlts_config(dlts, **options), "exp1"))
    await service.start()
    return service


@pytest.fixture
async def service(tmp_path: Path, dlts: DltsEmulator) -> AsyncIterator[DltsTrainingService]:
    started = await started_service(tmp_path, dlts)
    yield started
    await started.close()


async def submit(service: DltsTrainingService, trial: TrialSpec) -> Submitted:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    return submitted


async def run_to_end(service: DltsTrainingService, trial_id: str) -> tuple[Seen, list[str]]:
    """Poll as the manager does until the trial ended; what was seen and every waiting reason reported."""
    seen = await poll_until(service, lambda seen: trial_id in seen.ended)
    return seen, seen.waiting_reasons


async def test_every_state_is_read_and_waiting_reasons_reported(
    tmp_path: Path, watched: DltsEmulator
) -> None:
    service = await started_service(tmp_path, watched)
    try:
        submitted = await submit(service, spec(tmp_path, "echo hello"))
        seen, reasons = await run_to_end(service, "t1")
    finally:
        await service.close()
    assert seen.ended["t1"].status == TrialStatus.SUCCEEDED and seen.started == ["t1"]
    history = watched.history(submitted.handle["job_id"])
    assert history[:4] == ["unapproved", "queued", "scheduling", "running"]
    # The trial ends on the keeper's result.json; DLTS turns the job ``finished`` only once a client read it
    # ``running``, which a short trial may end before the service's next look.
    assert history[4:] in ([], ["finished"]), history
    assert reasons == [
        "waiting for approval (DLTS approves jobs within the team's quota)",
        "queued by DLTS, waiting for GPUs",
        "DLTS is creating the job's pod",
    ]


async def test_a_refused_submit_is_an_error_with_dltss_message(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    dlts.faults.submit_error("ERROR: Job name cannot be empty")
    with pytest.raises(PlatformError, match="Job name cannot be empty") as error:
        await service.submit(spec(tmp_path, "true"))
    assert dlts.url.split("//")[1].rstrip("/") in str(error.value)
    assert dlts.jobs() == []


async def test_an_overloaded_dashboard_defers_the_trial(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    dlts.faults.http_error(503, count=1, method="POST")
    deferred = await service.submit(spec(tmp_path, "true"))
    assert isinstance(deferred, Deferred) and "503" in deferred.reason
    submitted = await submit(service, spec(tmp_path, "true"))
    seen = await poll_until(service, lambda s: "t1" in s.ended)
    assert seen.ended["t1"].status == TrialStatus.SUCCEEDED
    assert [job["jobId"] for job in dlts.jobs()] == [submitted.handle["job_id"]]


async def test_a_job_dlts_forgets_is_lost(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    await poll_until(service, lambda s: "t1" in s.started)
    dlts.lose(submitted.handle["job_id"])
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and ended.message.startswith("lost: DLTS no longer knows the job")


async def test_a_launcher_error_is_an_infrastructure_failure(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    dlts.fail_launch("no node can pull the image")
    await submit(service, spec(tmp_path, "true"))
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and "no node can pull the image" in ended.message


async def test_a_paused_job_ends_the_attempt_and_is_killed(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    await poll_until(service, lambda s: "t1" in s.started)
    job_id = submitted.handle["job_id"]
    dlts.pause(job_id)
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and "paused by DLTS" in ended.message
    assert dlts.job(job_id)["status"] in ("killing", "killed")  # it must not resume and run again


async def test_a_preempted_job_ends_the_attempt_and_is_killed(tmp_path: Path, dlts: DltsEmulator) -> None:
    service = await started_service(tmp_path, dlts, preemptionAllowed=True)
    try:
        submitted = await submit(service, spec(tmp_path, "sleep 600"))
        await poll_until(service, lambda s: "t1" in s.started and dlts.job(submitted.handle["job_id"])["pid"])
        keeper = tmp_path / "nfs/work/trialfleet/exp1/trials/t1/keeper.json"
        await poll_until(service, lambda s: keeper.exists())
        job_id = submitted.handle["job_id"]
        dlts.preempt(job_id)
        ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    finally:
        await service.close()
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and "preempted" in ended.message
    assert dlts.job(job_id)["status"] in ("killing", "killed")


async def test_a_job_killed_on_the_dashboard_is_canceled(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    await poll_until(service, lambda s: "t1" in s.started)
    assert service.client is not None and await service.client.kill(submitted.handle["job_id"])
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)


async def test_the_job_log_is_read_with_its_cursor(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "true"))
    await poll_until(service, lambda s: "t1" in s.ended)
    # the keeper writes nothing to the pod's output; DLTS's bootstrap ends the log with the exit code
    dlts.step()
    log = (await service.read_trial_file("t1", submitted.handle, "dlts.log")).decode()
    assert log.rstrip().endswith(": 0")
    reads = [r for r in dlts.requests if r["path"].endswith("/log")]
    assert reads[-1]["status"] == 404 and len(reads) >= 2
    assert "cursor" in reads[1]["query"]


async def test_bad_credentials_are_refused_at_start(tmp_path: Path, dlts: DltsEmulator) -> None:
    config = dlts_config(dlts, password="0" * 32)
    service = DltsTrainingService(make_context(tmp_path / "experiment", config))
    with pytest.raises(PlatformError, match=r"refused the credentials of trialfleet@example\.com") as error:
        await service.start()
    assert "403 Invalid token" in str(error.value)


async def test_credentials_come_from_dltss_job_variables(
    tmp_path: Path, dlts: DltsEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = dlts_config(dlts, email=None, password=None, team=None)
    monkeypatch.setenv("DLWS_USER_EMAIL", dlts.email)
    monkeypatch.setenv("DLTS_JOB_TOKEN", dlts.password)
    monkeypatch.setenv("DLWS_VC_NAME", dlts.team)
    service = DltsTrainingService(make_context(tmp_path / "experiment", config))
    await service.start()
    try:
        assert service.gpu_type == "P40"  # the first GPU model of the team's virtual cluster
    finally:
        await service.close()
    monkeypatch.delenv("DLTS_JOB_TOKEN")
    with pytest.raises(PlatformError, match=r"`password` is not set in the config and \$DLTS_JOB_TOKEN"):
        await DltsTrainingService(make_context(tmp_path / "experiment", config)).start()
