"""A manager killed while its OpenPAI jobs run is resumed: it finds its jobs by the names in its trials' handles,
re-adopts them, and every trial ends once, with its metrics, without a second job for any trial. In reuse mode
(NNI's default) those jobs are workers, and the resumed manager gives the re-adopted workers the next trial."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_nni_examples import MNIST, SEARCH_SPACE, V2_CONFIG

from tests.emulators.openpai import OpenPAIEmulator
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

HELD = (
    """\
import os, time
while os.path.exists("/mnt/confignfs/hold"):
    time.sleep(0.05)
"""
    + MNIST
)


def test_a_killed_manager_is_resumed_and_readopts_its_jobs(tmp_path: Path, pai: OpenPAIEmulator) -> None:
    code = tmp_path / "mnist"
    code.mkdir()
    (code / "mnist.py").write_text(HELD)
    (tmp_path / "search_space.json").write_text(json.dumps(SEARCH_SPACE))
    nni = pai.nni_config("alice")
    config_text = V2_CONFIG.format(
        code=code,
        experiments=tmp_path / "experiments",
        host=nni["host"],
        token=nni["token"],
        mount=tmp_path / "nfs",
    )
    config_text = config_text.replace("trialConcurrency: 1", "trialConcurrency: 2").replace(
        "confignfs-data", "confignfs"
    )
    config = tmp_path / "config.yml"
    config.write_text(config_text)
    hold = tmp_path / "nfs" / "hold"
    hold.touch()
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()))
    found = re.search(r"Experiment ID: (\w+)", out)
    assert found is not None, out
    experiment_id = found.group(1)

    def statuses() -> list[str]:
        return [t["status"] for t in cli.json("trial", "ls", experiment_id, "--json")]

    wait_until(lambda: statuses().count("RUNNING") == 2, "two trials running on OpenPAI")
    resumed = kill_manager_and_resume(cli, experiment_id)
    assert "2 running trial(s) re-adopted" in resumed
    hold.unlink()
    wait_done_and_stop(cli, experiment_id)
    store = ExperimentStore.for_experiment_dir(tmp_path / "experiments" / experiment_id)
    try:
        trials = store.trials()
        assert [t.status for t in trials] == [TrialStatus.SUCCEEDED] * 3
        assert all(len(store.metrics(t.id, type="PERIODICAL")) == 3 for t in trials)
    finally:
        store.close()
    jobs = [name for name in pai.cluster.frameworks if f"nni_exp_{experiment_id}_" in name]
    # reuse mode, NNI's default: the two worker jobs ran the three trials, the third one after the resume
    assert all("worker" in t.handle for t in trials)
    assert sorted(jobs) == sorted({f"alice~{t.handle['job']}" for t in trials}) and len(jobs) == 2
