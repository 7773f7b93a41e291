"""The Azure ML service against Azure ML's habits, each shown by the emulator: every job state read in turn,
images that cannot be pulled, lost nodes, jobs cancelled outside trialfleet, cancel as a long-running
operation, the run's log files, the trial's records through MLflow, and credentials that do not work."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aml_helpers import aml_config, job_trial_dir

from tests.emulators.aml import AmlEmulator, Timing
from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import Seen, make_context, poll_until
from trialfleet.training_services.aml import AmlTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {"x": 1}})
REPORT = (
    "import json, os; m = open(os.path.join(os.environ['NNI_SYS_DIR'], '.nni', 'metrics'), 'ab'); "
    "p = json.dumps({'parameter_id': 1, 'trial_job_id': 't1', 'type': 'FINAL', 'sequence': 0, 'value': '0.5'}); "
    "m.write(b'ME%06d' % (len(p) + 1) + p.encode() + b'\\n')"
)


def spec(tmp_path: Path, command: str, trial_id: str = "t1") -> TrialSpec:
    code_dir = tmp_path / "code"
    code_dir.mkdir(exist_ok=True)
    return TrialSpec(trial_id, 0, command, code_dir, RECORD)


async def started_service(tmp_path: Path, aml: AmlEmulator, **options: Any) -> AmlTrainingService:
    service = AmlTrainingService(make_context(tmp_path / "experiment", aml_config(aml, **options), "exp1"))
    await service.start()
    return service


@pytest.fixture
async def service(tmp_path: Path, aml: AmlEmulator) -> AsyncIterator[AmlTrainingService]:
    started = await started_service(tmp_path, aml)
    yield started
    await started.close()


@pytest.fixture
def watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AmlEmulator]:
    """An emulator whose jobs leave a state only once a client was shown it: every state must be read."""
    emulator = AmlEmulator(tmp_path / "aml", timing=Timing(state_delay=0.02, cancel_grace=1.0))
    emulator.start()
    try:
        for key, value in emulator.client_env().items():
            monkeypatch.setenv(key, value)
        yield emulator
    finally:
        emulator.stop()


async def submit(service: AmlTrainingService, trial: TrialSpec) -> Submitted:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    return submitted


async def run_to_end(service: AmlTrainingService, trial_id: str) -> tuple[Seen, list[str]]:
    """Poll as the manager does until the trial ended; what was seen and every waiting reason reported."""
    seen = await poll_until(service, lambda seen: trial_id in seen.ended)
    return seen, seen.waiting_reasons


async def test_every_state_is_read_and_the_metric_arrives(tmp_path: Path, watched: AmlEmulator) -> None:
    service = await started_service(tmp_path, watched)
    try:
        submitted = await submit(service, spec(tmp_path, f'python3 -c "{REPORT}"'))
        seen, reasons = await run_to_end(service, "t1")
    finally:
        await service.close()
    assert seen.ended["t1"].status == TrialStatus.SUCCEEDED, seen.ended
    assert [(m.type, m.data) for m in seen.metrics] == [("FINAL", "0.5")]
    history = [s for s, _ in watched.job(submitted.handle["job_name"]).history]
    # the trial's end is the keeper's record: the job may still run or finalize when it is reported
    assert history[:5] == ["NotStarted", "Starting", "Preparing", "Queued", "Running"]
    assert reasons[-3:] == [
        "Azure ML is starting the job",
        "Azure ML is preparing the job's environment (image)",
        "queued for the compute target",
    ]
    # the trial's records went through the job's MLflow run
    shipped = [m for m in watched.metrics(submitted.handle["job_name"]) if m["key"] == "trialfleet.shipped"]
    assert shipped and [m["step"] for m in shipped] == sorted(m["step"] for m in shipped)


async def test_an_image_that_cannot_be_pulled_is_an_infrastructure_failure(
    tmp_path: Path, aml: AmlEmulator
) -> None:
    aml.configure(failImages=["registry.invalid/nope:1"])
    service = await started_service(tmp_path, aml, dockerImage="registry.invalid/nope:1")
    try:
        await submit(service, spec(tmp_path, "true"))
        ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    finally:
        await service.close()
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and "before the trial started" in ended.message


async def test_a_lost_node_is_an_infrastructure_failure(
    tmp_path: Path, aml: AmlEmulator, service: AmlTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    await poll_until(service, lambda s: "t1" in s.started)
    aml.force_status(submitted.handle["job_name"], "NotResponding")
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert ended.message is not None and "stopped responding" in ended.message


async def test_a_job_cancelled_outside_is_user_canceled(
    tmp_path: Path, aml: AmlEmulator, service: AmlTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    await poll_until(service, lambda s: "t1" in s.started)
    await asyncio.to_thread(lambda: aml.ml_client().jobs.begin_cancel(submitted.handle["job_name"]).result())
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)


async def test_cancel_is_azure_mls_long_running_operation(
    tmp_path: Path, aml: AmlEmulator, service: AmlTrainingService
) -> None:
    submitted = await submit(service, spec(tmp_path, "sleep 600"))
    name = submitted.handle["job_name"]
    await poll_until(service, lambda s: "t1" in s.started)
    await service.cancel("t1", TrialStatus.EARLY_STOPPED)
    ended = (await poll_until(service, lambda s: "t1" in s.ended)).ended["t1"]
    assert (ended.status, ended.failure_kind) == (TrialStatus.EARLY_STOPPED, FailureKind.CANCELED)
    cancels = [r for r in aml.requests() if r.method == "POST" and r.path.endswith(f"/jobs/{name}/cancel")]
    assert [r.status for r in cancels] == [202]
    # the trial's end is the keeper's record: the job ends once its forwarder handed over the rest
    await poll_until(service, lambda s: aml.job(name).history[-1][0] == "Canceled")
    assert [s for s, _ in aml.job(name).history][-2:] == ["CancelRequested", "Canceled"]


async def test_the_runs_log_files_are_read(tmp_path: Path, service: AmlTrainingService) -> None:
    submitted = await submit(service, spec(tmp_path, "echo to the trial output"))
    await poll_until(service, lambda s: "t1" in s.ended)
    log = (await service.read_trial_file("t1", submitted.handle, "std_log.txt")).decode()
    assert "trialfleet: running the trial in" in log and "the trial ended (exit code 0)" in log
    assert await service.read_trial_file("t1", submitted.handle, "stdout") == b"to the trial output\n"
    with pytest.raises(FileNotFoundError):
        await service.read_trial_file("t1", submitted.handle, "user_logs/no_such_log.txt")


async def test_credentials_that_do_not_work_are_refused_at_start(
    tmp_path: Path, aml: AmlEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "not-the-secret")
    service = AmlTrainingService(make_context(tmp_path / "experiment", aml_config(aml)))
    with pytest.raises(PlatformError, match=r"workspace trialfleet-ws .*cannot read the workspace"):
        await service.start()


async def test_an_unknown_compute_target_is_refused_at_start(tmp_path: Path, aml: AmlEmulator) -> None:
    service = AmlTrainingService(
        make_context(tmp_path / "experiment", aml_config(aml, computeTarget="gpu-x"))
    )
    with pytest.raises(PlatformError, match="cannot read compute target 'gpu-x'"):
        await service.start()


async def test_a_trial_writing_50_mb_of_logs_keeps_its_result_and_metrics(
    tmp_path: Path, service: AmlTrainingService, aml: AmlEmulator
) -> None:
    """50 MB of output would be 17,000 tags of 4,000 characters: Azure ML keeps 50 tags of 1,000 per run (the
    emulator refuses more, as Azure does). The metric and the trial's end still arrive; the log reaches the
    manager up to the cap and stays whole in the job's outputs."""
    from trialfleet.training_services.aml import forwarder

    write = "import sys\nfor _ in range(51200): sys.stdout.buffer.write(b'x' * 1023 + b'\\n')"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "verbose.py").write_text(write + "\n")
    submitted = await submit(service, spec(tmp_path, f'python3 verbose.py && python3 -c "{REPORT}"'))
    seen, _ = await run_to_end(service, "t1")
    assert seen.ended["t1"].status == TrialStatus.SUCCEEDED, seen.ended
    assert [(m.type, m.data) for m in seen.metrics] == [("FINAL", "0.5")]
    mirror = Path(submitted.handle["trial_dir"])
    assert (mirror / "trial.stdout").stat().st_size == forwarder.FILE_CAP
    assert (mirror / "result.json").exists()
    assert (job_trial_dir(aml, submitted.handle["job_name"]) / "trial.stdout").stat().st_size == 50 * 2**20
