"""Reuse mode on the OpenPAI emulator (NNI's default there): trials run one after another in one worker job, a
worker stopped outside trialfleet fails its trial as an infrastructure failure, and where reuse cannot work (the
storage not mounted here) every attempt is a job of its own and the log says why."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from openpai_helpers import openpai_block, openpai_context, submitted, trial_spec

from tests.emulators.openpai import OpenPAIEmulator
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.openpai import OpenpaiConfig, OpenpaiTrainingService

PYTHON = sys.executable
HOLD = f"{PYTHON} -c 'import os, time\nwhile os.path.exists(\"/mnt/confignfs/hold\"): time.sleep(0.05)'"


def posted(pai: OpenPAIEmulator) -> list[str]:
    return [r["path"] for r in pai.requests if r["method"] == "POST" and r["path"].endswith("/jobs")]


def test_reuse_mode_is_nni_s_default_on_openpai(pai: OpenPAIEmulator) -> None:
    block = openpai_block(pai)
    del block["reuseMode"]
    assert OpenpaiConfig.model_validate(block).reuse_mode is True


async def test_trials_run_one_after_another_in_one_worker_job(pai: OpenPAIEmulator, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    service = OpenpaiTrainingService(openpai_context(pai, tmp_path / "experiment", reuseMode=True))
    service.watcher.min_interval = 0.2
    await service.start()
    try:
        jobs = set()
        for n in range(3):
            job = await submitted(service, trial_spec(f"t{n}", f"echo {n} > out", code))
            jobs.add(job.handle["job"])
            ended = (await poll_until(service, lambda s, n=n: f"t{n}" in s.ended)).ended[f"t{n}"]
            assert ended.status is TrialStatus.SUCCEEDED
            assert (Path(job.handle["trial_dir"]) / "trial.stdout").exists()
        assert len(jobs) == 1 and next(iter(jobs)).startswith("nni_exp_contract_worker_")
        assert len(posted(pai)) == 1
    finally:
        await service.close()


async def test_a_worker_stopped_outside_trialfleet_fails_its_trial_for_a_retry(
    pai: OpenPAIEmulator, tmp_path: Path
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (tmp_path / "nfs").mkdir(exist_ok=True)
    (tmp_path / "nfs" / "hold").touch()
    service = OpenpaiTrainingService(openpai_context(pai, tmp_path / "experiment", reuseMode=True))
    service.watcher.min_interval = 0.2
    await service.start()
    try:
        job = await submitted(service, trial_spec("held", HOLD, code))
        await poll_until(service, lambda s: "held" in s.started)
        await service.client.stop(job.handle["job"])  # as a user or an admin would, from OpenPAI's web portal
        ended = (await poll_until(service, lambda s: "held" in s.ended)).ended["held"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        retry = await submitted(service, trial_spec("held", "exit 0", code, attempt=1))
        assert retry.handle["job"] != job.handle["job"]
        assert (await poll_until(service, lambda s: "held" in s.ended)).ended["held"].status is (
            TrialStatus.SUCCEEDED
        )
    finally:
        await service.close()


async def test_without_the_storage_mounted_here_reuse_is_said_not_to_be_acted_on(
    pai: OpenPAIEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    context = openpai_context(pai, tmp_path / "experiment", reuseMode=True, localStorageMountPoint=None)
    service = OpenpaiTrainingService(context)
    with caplog.at_level(logging.WARNING):
        await service.start()
    try:
        assert service.fleet is None
        assert "reuseMode is not acted on without localStorageMountPoint" in caplog.text
    finally:
        await service.close()
