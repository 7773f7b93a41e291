"""The Slurm service's decisions that a healthy single-node Slurm cannot show: a controller that does not
answer, options it refuses, a manager restarted between sbatch and recording the job, which scancel is sent.

Slurm's commands are stand-ins (slurm_fake_commands); tests/integration/slurm runs the same service on Slurm.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from slurm_fake_commands import FakeSlurm

from trialfleet.errors import PlatformError
from trialfleet.status import TrialStatus
from trialfleet.testing import make_context
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.slurm import SlurmConfig, SlurmTrainingService
from trialfleet.training_services.slurm.runner import LocalCommandRunner
from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec

NO_ACCOUNTING = "AccountingStorageType   = accounting_storage/none\n"
ACCOUNTING = "AccountingStorageType   = accounting_storage/slurmdbd\n"


def context(tmp_path: Path, **options: Any) -> ExperimentContext:
    config = SlurmConfig(trial_command="unused", shared_directory=tmp_path / "shared", **options)
    return make_context(tmp_path / "exp", config, "unitexp")


def spec(tmp_path: Path, attempt: int = 0) -> TrialSpec:
    code = tmp_path / "shared" / "code"
    code.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"parameter_id": 0, "parameter_source": "algorithm", "parameters": {}})
    return TrialSpec("trial1", 0, "true", code, record, attempt=attempt)


async def started(tmp_path: Path, fake: FakeSlurm, **options: Any) -> SlurmTrainingService:
    service = SlurmTrainingService(context(tmp_path, **options), runner=LocalCommandRunner(fake.env))
    await service.start()
    return service


async def test_a_controller_that_does_not_answer_stops_the_start_with_its_error(tmp_path: Path) -> None:
    error = "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"
    fake = FakeSlurm(tmp_path, scontrol={"code": 1, "err": error})
    with pytest.raises(PlatformError, match=r"cannot reach the Slurm controller .*connect failure"):
        await started(tmp_path, fake)


async def test_a_machine_without_slurm_commands_is_refused(tmp_path: Path) -> None:
    service = SlurmTrainingService(context(tmp_path), runner=LocalCommandRunner({"PATH": str(tmp_path)}))
    with pytest.raises(PlatformError, match="cannot run scontrol on this machine"):
        await service.start()


@pytest.mark.slow
async def test_sacct_is_used_when_accounting_exists_unless_told_otherwise(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, scontrol=ACCOUNTING)
    assert (await started(tmp_path, fake)).watcher.use_sacct
    assert not (await started(tmp_path, fake, use_sacct=False)).watcher.use_sacct
    fake.answer(scontrol=NO_ACCOUNTING)
    with pytest.raises(PlatformError, match="useSacct is true"):
        await started(tmp_path, fake, use_sacct=True)


async def test_submit_waits_when_slurm_cannot_say_whether_the_trial_was_submitted(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, scontrol=NO_ACCOUNTING, squeue={"code": 1, "err": "Socket timed out\n"})
    result = await (await started(tmp_path, fake)).submit(spec(tmp_path))
    assert isinstance(result, Deferred) and "Socket timed out" in result.reason
    assert fake.calls("sbatch") == []


async def test_a_job_sbatch_refuses_is_an_error_with_its_message(tmp_path: Path) -> None:
    error = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination\n"
    fake = FakeSlurm(tmp_path, scontrol=NO_ACCOUNTING, squeue="", sbatch={"code": 1, "err": error})
    with pytest.raises(PlatformError, match="Invalid account"):
        await (await started(tmp_path, fake)).submit(spec(tmp_path))


async def test_a_job_of_the_same_attempt_is_adopted_instead_of_submitted_again(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, scontrol=NO_ACCOUNTING, squeue="17|trialfleet attempt 0|\n", sbatch="99\n")
    service = await started(tmp_path, fake)
    result = await service.submit(spec(tmp_path))
    assert isinstance(result, Submitted) and result.handle["job_id"] == "17" and not result.started
    assert fake.calls("sbatch") == []
    assert fake.calls("squeue")[0][-2:] == [
        "--name=nni_exp_unitexp_trial_trial1",
        "--Format=JobID:|,Comment:|",
    ]
    retry = await service.submit(spec(tmp_path, attempt=1))  # another attempt's job does not count
    assert isinstance(retry, Submitted) and retry.handle["job_id"] == "99"
    assert retry.handle["trial_dir"].endswith("/trials/trial1.1")


@pytest.mark.slow
async def test_a_started_job_slurm_forgot_is_found_by_the_id_it_wrote(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, scontrol=NO_ACCOUNTING, squeue="", sbatch="99\n")
    service = await started(tmp_path, fake)
    trial_dir = Path(service.root) / "trials" / "trial1"
    trial_dir.mkdir(parents=True)
    (trial_dir / "slurm_job_id").write_text("23\n")
    result = await service.submit(spec(tmp_path))
    assert isinstance(result, Submitted) and result.handle["job_id"] == "23"
    assert fake.calls("sbatch") == []


@pytest.mark.parametrize(
    ("state", "keeper_started", "scancel"),
    [
        ("PENDING", False, ["scancel", "17"]),
        ("RUNNING", False, ["scancel", "17"]),  # in its setup script: the keeper is not there to signal
        ("RUNNING", True, ["scancel", "--batch", "--signal=TERM", "17"]),
    ],
)
@pytest.mark.slow
async def test_cancel_signals_the_keeper_when_it_runs_and_cancels_the_job_otherwise(
    tmp_path: Path, state: str, keeper_started: bool, scancel: list[str]
) -> None:
    fake = FakeSlurm(tmp_path, scontrol=NO_ACCOUNTING, squeue=f"17|{state}|0|None|\n")
    service = await started(tmp_path, fake)
    trial_dir = Path(service.root) / "trials" / "trial1"
    trial_dir.mkdir(parents=True)
    if keeper_started:
        (trial_dir / "keeper.json").write_text("{}")
    await service.adopt("trial1", {"job_id": "17", "trial_dir": str(trial_dir)}, {})
    await service.poll()
    await service.cancel("trial1", TrialStatus.USER_CANCELED)
    assert fake.calls("scancel") == [scancel]
