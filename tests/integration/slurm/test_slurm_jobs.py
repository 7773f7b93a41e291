"""The Slurm platform on a real Slurm, beyond the contract: GPUs through GRES, jobs waiting in the queue,
scancel from outside, sbatch refusing a job, a hostile shared directory with the code copied onto it."""

from __future__ import annotations

from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster
from slurm_helpers import HOLD, SeenQueued, hold_command, seen_by, slurm_context, submitted, trial_spec

from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import poll_until, wait_for_file
from trialfleet.training_services.slurm import SlurmTrainingService

pytestmark = pytest.mark.slurm


async def test_gpu_trials_get_the_devices_slurm_hands_out(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    gres = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path))
    gpus = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path, gpu_request_style="gpus"))
    try:
        await gres.start()
        await gpus.start()
        for trial_id in ("gpuA", "gpuB"):
            await submitted(gres, trial_spec(trial_id, hold_command(control), code_dir, gpu_number=1))
        await wait_for_file(control / "gpuA.json")
        await wait_for_file(control / "gpuB.json")
        both = await submitted(gpus, trial_spec("gpuBoth", hold_command(control), code_dir, gpu_number=2))
        await submitted(gpus, trial_spec("gpuNone", hold_command(control), code_dir, gpu_number=0))
        assert not both.started
        queued = SeenQueued()
        waiting = await poll_until(gpus, lambda s: queued.waiting.get("gpuBoth") == "Resources", queued)
        assert "gpuBoth" not in waiting.started
        assert {seen_by(control, "gpuA")["cuda"], seen_by(control, "gpuB")["cuda"]} == {"0", "1"}
        (control / "release").touch()
        first = await poll_until(gres, lambda s: {"gpuA", "gpuB"} <= s.ended.keys())
        second = await poll_until(gpus, lambda s: {"gpuBoth", "gpuNone"} <= s.ended.keys(), waiting)
        ended = {**first.ended, **second.ended}
        assert {t: e.status for t, e in ended.items()} == dict.fromkeys(ended, TrialStatus.SUCCEEDED)
        assert "gpuBoth" in second.started
        assert seen_by(control, "gpuBoth")["cuda"] == "0,1"
        assert seen_by(control, "gpuNone")["cuda"] == ""
    finally:
        await gres.close()
        await gpus.close()


async def test_scancel_from_outside_is_seen_as_a_user_cancel(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    service = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path))
    await service.start()
    try:
        job = await submitted(service, trial_spec("outside", hold_command(control), code_dir))
        await wait_for_file(control / "outside.json")
        slurm_cluster.run("scancel", job.handle["job_id"])
        ended = (await poll_until(service, lambda s: "outside" in s.ended)).ended["outside"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        assert ended.message is not None and "outside trialfleet" in ended.message
    finally:
        await service.close()


async def test_a_job_waiting_in_the_queue_shows_why_and_can_be_cancelled(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    context = slurm_context(tmp_path / "exp", tmp_path, sbatch_options=["--begin=now+1hour"])
    service = SlurmTrainingService(context)
    await service.start()
    try:
        job = await submitted(service, trial_spec("later", hold_command(control), code_dir))
        queued = SeenQueued()
        await poll_until(service, lambda s: queued.waiting.get("later") == "BeginTime", queued)
        await service.cancel("later")
        seen = await poll_until(service, lambda s: "later" in s.ended, queued)
        ended = seen.ended["later"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        assert seen.started == [] and not (control / "later.json").exists()
        state = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", job.handle["job_id"], "-o", "%T")
        assert state.stdout.strip() == "CANCELLED"
    finally:
        await service.close()


async def test_a_job_sbatch_refuses_is_a_platform_error(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    service = SlurmTrainingService(slurm_context(tmp_path / "exp", tmp_path, partition="nowhere"))
    await service.start()
    try:
        with pytest.raises(PlatformError, match="invalid partition"):
            await service.submit(trial_spec("refused", hold_command(control), code_dir))
    finally:
        await service.close()


async def test_hostile_shared_directory_with_the_code_copied_onto_it(
    tmp_path: Path, slurm_cluster: SlurmCluster, code_dir: Path, control: Path
) -> None:
    shared = tmp_path / "shared 'q' \"dq\" $(touch pwned) `touch pwned` %j ünï ✓\nnew line"
    (code_dir / ".nniignore").write_text("data/\n")
    (code_dir / "data").mkdir()
    (code_dir / "data" / "big.bin").write_bytes(b"x" * 1000)
    setup = "export FROM_SETUP=\"$(echo set up) 'ok'\""
    service = SlurmTrainingService(slurm_context(tmp_path / "exp", shared, setup_script=setup))
    await service.start()
    try:
        job = await submitted(service, trial_spec("copied", hold_command(control), code_dir))
        (control / "release").touch()
        ended = (await poll_until(service, lambda s: "copied" in s.ended)).ended["copied"]
        assert ended.status is TrialStatus.SUCCEEDED, ended
        seen = seen_by(control, "copied")
        copy = Path(str(seen["cwd"]))
        assert copy.parent == service.root / "code" and seen["code_dir"] == str(copy)
        assert (copy / "hold.py").read_text() == HOLD and not (copy / "data").exists()
        assert seen["from_setup"] == "set up 'ok'"
        trial_dir = Path(job.handle["trial_dir"])
        assert trial_dir.parent == shared / service.context.experiment_id / "trials"
        assert (trial_dir / "slurm.out").exists() and (trial_dir / "slurm_job_id").read_text().strip() == (
            job.handle["job_id"]
        )
        assert list(tmp_path.rglob("pwned")) == []
    finally:
        await service.close()
