"""Trials that use the real NNI 3.0 package run unchanged: trialfleet speaks NNI's own file channel.

Needs an interpreter with ``nni==3.0`` named by ``TRIALFLEET_REAL_NNI_PYTHON``; ``scripts/test`` makes one
(a cached virtualenv). Under CI its absence is a failure, not a skip.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from trialfleet.config import ExperimentConfig
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import ExperimentStatus, TrialStatus

REAL_NNI_PYTHON = os.environ.get("TRIALFLEET_REAL_NNI_PYTHON", "")

TRIAL = """
import os
import nni

with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "nni_file"), "w") as f:
    f.write(nni.__file__)
params = nni.get_next_parameter()
for step in range(3):
    nni.report_intermediate_result(params["x"] + step)
nni.report_final_result({"default": params["x"], "step_count": 3})
"""


@pytest.fixture
def real_nni_python() -> str:
    if not REAL_NNI_PYTHON:
        message = (
            "TRIALFLEET_REAL_NNI_PYTHON (an interpreter with nni==3.0) is not set; scripts/test makes one"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return REAL_NNI_PYTHON


async def test_trials_importing_the_real_nni_report_through_its_own_channel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_nni_python: str
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(TRIAL)
    config = ExperimentConfig.for_platform(
        "local",
        trial_command=f"{real_nni_python} trial.py",
        trial_code_directory=str(code),
        trial_concurrency=3,
        max_trial_number=3,
        search_space={"x": {"_type": "choice", "_value": [10, 20, 30]}},
        tuner={"name": "GridSearch"},
        experiment_working_directory=str(tmp_path / "exps"),
    )
    _, experiment_dir = create_experiment(config)
    manager = ExperimentManager(experiment_dir)
    await manager.start()
    assert "PYTHONPATH" not in manager.service._shim_env, "the shim would shadow the trial's real nni"  # type: ignore[union-attr]
    for _ in range(3000):
        await manager.step()
        if manager.status is ExperimentStatus.DONE:
            break
        await asyncio.sleep(0.02)
    manager.request_stop()
    await manager.run()

    trials = manager.store.trials()
    assert [t.status for t in trials] == [TrialStatus.SUCCEEDED] * 3, [t.message for t in trials]
    for trial in trials:
        trial_dir = Path(trial.handle["trial_dir"])  # type: ignore[index]
        nni_file = (trial_dir / "nni_file").read_text()
        assert Path(nni_file).is_relative_to(Path(real_nni_python).parent.parent), "not the real nni"
        x = trial.hyper_parameters["x"]
        assert [json.loads(m.data) for m in manager.store.metrics(trial.id, type="PERIODICAL")] == [
            x,
            x + 1,
            x + 2,
        ]
        assert json.loads(trial.final_data or "null") == {"default": x, "step_count": 3}
