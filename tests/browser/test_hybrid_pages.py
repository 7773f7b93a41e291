"""A live hybrid experiment in the web UI: its trials table shows each trial's platform, its overview says which
platform failed and why. The experiment is served by the real manager process: local + a remote platform whose
only machine refuses connections, so it fails to start and the trials run on local."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from webui_experiments import SEARCH_SPACE, TRIAL_SCRIPT, manager_process, screenshot, wait_for

from trialfleet.config import ExperimentConfig
from trialfleet.manager.launcher import create_experiment
from trialfleet.storage import ExperimentStore

pytestmark = pytest.mark.browser

TRIALS = 3


def closed_port() -> int:
    """A port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hybrid_experiment(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(textwrap.dedent(TRIAL_SCRIPT))
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    machine = {"host": "127.0.0.1", "port": closed_port(), "user": "nobody", "sshKeyFile": str(key)}
    config = ExperimentConfig.from_dict(
        {
            "experimentName": "hybrid",
            "trialCommand": f"{sys.executable} trial.py",
            "trialCodeDirectory": str(code),
            "trialConcurrency": 2,
            "maxTrialNumber": TRIALS,
            "searchSpace": SEARCH_SPACE,
            "tuner": {"name": "Random", "classArgs": {"seed": 1}},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": [{"platform": "local"}, {"platform": "remote", "machineList": [machine]}],
        }
    )
    return create_experiment(config)[1]


def test_trials_show_their_platform_and_the_overview_the_failed_one(tmp_path: Path, page: Any) -> None:
    experiment_dir = hybrid_experiment(tmp_path)
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    with manager_process(experiment_dir, "create") as manager:
        wait_for(lambda: store.experiment().status.value == "DONE", 120, "the experiment done")
        page.goto(f"{manager.url}/#/overview")
        callout = page.locator("#platform-problems")
        callout.wait_for()
        assert (
            "remote: FAILED: it did not start: remote: 1 of 1 machine(s) cannot be used"
            in callout.inner_text()
        )
        screenshot(page, "hybrid-overview")

        page.goto(f"{manager.url}/#/trials")
        page.wait_for_function(
            "n => document.querySelectorAll('#trials-table tbody tr').length === n", arg=TRIALS
        )
        headers = [t.strip() for t in page.locator("#trials-table thead th").all_inner_texts()]
        column = headers.index("Platform")
        cells = page.locator(f"#trials-table tbody tr td:nth-child({column + 1})").all_inner_texts()
        assert [c.strip() for c in cells] == ["local"] * TRIALS
        screenshot(page, "hybrid-trials")
    assert {t.platform for t in store.trials()} == {"local"}
    store.close()
