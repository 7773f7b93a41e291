"""What a cluster job's launch script sets for its trial, once for Slurm, DLTS and OpenPAI (environment.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialfleet.training_services.environment import job_variables
from trialfleet.training_services.spec import TrialSpec


def spec(gpu_number: int | None, env: dict[str, str] | None = None) -> TrialSpec:
    return TrialSpec("t1", 3, "python3 train.py", Path("/code"), "{}", gpu_number=gpu_number, env=env or {})


def variables(trial: TrialSpec) -> dict[str, str]:
    return job_variables("slurm", "exp", trial, trial_dir="/shared/exp/trials/t1", code_dir="/shared/code")


@pytest.mark.parametrize(("gpu_number", "visible"), [(0, ""), (None, None), (2, None)])
def test_zero_gpus_hide_every_gpu_and_others_leave_the_variable_to_the_scheduler(
    gpu_number: int | None, visible: str | None
) -> None:
    env = variables(spec(gpu_number))
    assert env.get("CUDA_VISIBLE_DEVICES") == visible
    assert "CUDA_DEVICE_ORDER" not in env


def test_nni_variables_then_the_spec_own_then_the_gpu_rule() -> None:
    env = variables(spec(0, {"NNI_OUTPUT_DIR": "/elsewhere", "CUDA_VISIBLE_DEVICES": "0", "SEED": "1"}))
    assert (
        env["NNI_TRIAL_JOB_ID"] == "t1" and env["NNI_TRIAL_SEQ_ID"] == "3" and env["NNI_PLATFORM"] == "slurm"
    )
    assert env["NNI_OUTPUT_DIR"] == "/elsewhere" and env["SEED"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # zero GPUs wins over the spec's own
