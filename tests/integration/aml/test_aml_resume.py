"""A manager killed while its Azure ML worker jobs run trials is resumed (reuse mode, the default): it re-adopts the
workers and their running trials from the trials' handles, every trial ends once with its metrics once, and the
re-adopted workers run the third trial: no job beyond the two workers."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from test_aml_examples import EXAMPLE, WORKTREE, cloud, point_at

from tests.emulators.aml import AmlEmulator
from tests.integration.cli_harness import (
    Cli,
    free_port,
    kill_manager_and_resume,
    wait_done_and_stop,
    wait_until,
)
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore

pytestmark = pytest.mark.slow


def test_a_killed_manager_is_resumed_and_readopts_its_workers(tmp_path: Path, aml: AmlEmulator) -> None:
    code = tmp_path / "example"
    shutil.copytree(EXAMPLE, code)
    hold = tmp_path / "hold"
    hold.touch()
    held = f"import os, time\nwhile os.path.exists({str(hold)!r}):\n    time.sleep(0.05)\n"
    (code / "mnist.py").write_text(held + (code / "mnist.py").read_text())
    data = yaml.safe_load(point_at(aml, (code / "config_aml.yml").read_text()))
    data["trainingService"].update(cloud(aml))
    data.update(
        experimentWorkingDirectory=str(tmp_path / "experiments"), maxTrialNumber=3, trialConcurrency=2
    )
    (code / "config_aml.yml").write_text(yaml.safe_dump(data))
    cli = Cli.in_dir(tmp_path)
    cli.env["PYTHONPATH"] = os.environ.get("PYTHONPATH", WORKTREE)
    out = cli.ok("create", "--config", str(code / "config_aml.yml"), "--port", str(free_port()))
    found = re.search(r"Experiment ID: (\w+)", out)
    assert found is not None, out
    experiment_id = found.group(1)

    def statuses() -> list[str]:
        return [t["status"] for t in cli.json("trial", "ls", experiment_id, "--json")]

    wait_until(
        lambda: statuses().count("RUNNING") == 2, "two trials running in Azure ML workers", timeout=120
    )
    resumed = kill_manager_and_resume(cli, experiment_id)
    assert "2 running trial(s) re-adopted" in resumed
    hold.unlink()
    wait_done_and_stop(cli, experiment_id)
    store = ExperimentStore.for_experiment_dir(tmp_path / "experiments" / experiment_id)
    try:
        trials = store.trials()
        assert [t.status for t in trials] == [TrialStatus.SUCCEEDED] * 3
        periodical = [len(store.metrics(t.id, type="PERIODICAL")) for t in trials]
        finals = [len(store.metrics(t.id, type="FINAL")) for t in trials]
    finally:
        store.close()
    assert periodical == [5, 5, 5] and finals == [1, 1, 1]  # mnist.py's 5 epochs: each metric once
    jobs = sorted(job["name"] for job in aml.job_states())
    assert all("worker" in t.handle for t in trials)
    assert jobs == sorted({t.handle["job_name"] for t in trials}) and len(jobs) == 2
    assert all(name.startswith(f"nni_exp_{experiment_id}_worker_") for name in jobs)
    claimed = [  # each attempt taken once by a worker: nothing ran twice
        entry.name
        for job in jobs
        for entry in (aml.root / "jobs" / job / "wd/outputs/trialfleet-worker/worker/claimed").iterdir()
    ]
    assert sorted(claimed) == sorted(t.id for t in trials)
