"""Trials that try to escape or to hang the manager, through the real CLI and a live manager: secrets of the
manager's environment stay out of command.json and off the REST API, a FIFO in a trial directory is refused
at once, a 64 MB log is streamed (the manager's memory does not grow with it), a double-forked daemon in its own
session dies with its trial even after its keeper was SIGKILLed, and a SIGSTOPped keeper still ends its trial."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until
from trialfleet.trial_keeper.keeper import process_alive

TRIAL = r"""
import os, sys, time
import nni

nni.get_next_parameter()
out = os.environ["NNI_OUTPUT_DIR"]
open(os.path.join(out, "seen_token"), "w").write(os.environ.get("TRIALFLEET_TEST_TOKEN", "<unset>"))
os.mkfifo(os.path.join(out, "pipe"))
with open(os.path.join(out, "big.log"), "wb") as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))
if os.fork() == 0:  # a daemon: its own session, double-forked, re-parented away from everything
    os.setsid()
    if os.fork() == 0:
        open(os.path.join(out, "daemon.pid"), "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
open(os.path.join(out, "ready"), "w").close()
while True:
    time.sleep(0.05)
"""
TOKEN = "s3cr3t-token-of-the-manager"


@dataclass
class Live:
    cli: Cli
    experiment_id: str
    url: str
    trial_dirs: list[Path]

    def get(self, path: str, timeout: float = 20) -> httpx.Response:
        return httpx.get(f"{self.url}/api/v1/nni/{path}", timeout=timeout)

    def jobs(self) -> list[dict]:
        return self.get("trial-jobs").json()  # type: ignore[no-any-return]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL)
    config = tmp_path / "config.yml"
    config.write_text(
        "searchSpace: {x: {_type: choice, _value: [1, 2]}}\n"
        f"trialCommand: {sys.executable} trial.py\ntrialCodeDirectory: code\ntrialConcurrency: 2\n"
        f"maxTrialNumber: 2\ntuner: {{name: GridSearch}}\nexperimentWorkingDirectory: {tmp_path / 'exps'}\n"
        "trainingService: {platform: local}\n"
    )
    cli = Cli.in_dir(tmp_path)
    cli.env["TRIALFLEET_TEST_TOKEN"] = TOKEN  # in the manager's environment, as a cloud credential would be
    port = free_port()
    created = cli.ok("create", "--config", str(config), "--port", str(port))
    experiment_id = re.search(r"Experiment ID: (\w+)", created).group(1)  # type: ignore[union-attr]
    live = Live(cli, experiment_id, f"http://127.0.0.1:{port}", [])
    try:
        wait_until(
            lambda: len([j for j in live.jobs() if j["status"] == "RUNNING"]) == 2, "two running trials"
        )
        exp_dir = tmp_path / "exps" / experiment_id
        live.trial_dirs = sorted(p for p in (exp_dir / "trials").iterdir() if p.is_dir())
        wait_until(lambda: all((d / "ready").exists() for d in live.trial_dirs), "trials ready")
        yield live
    finally:
        cli.run("stop", experiment_id)


def test_the_managers_secrets_stay_out_of_trial_files_and_off_the_api(live: Live) -> None:
    trial_dir = live.trial_dirs[0]
    trial_id = trial_dir.name  # the directory of attempt 0 is named after the trial
    assert (trial_dir / "seen_token").read_text() == TOKEN, "the trial inherits the manager's environment"
    command = (trial_dir / "command.json").read_text()
    assert TOKEN not in command and "TRIALFLEET_TEST_TOKEN" not in command
    assert json.loads(command)["env"]["NNI_TRIAL_JOB_ID"] in {j["trialJobId"] for j in live.jobs()}
    refused = live.get(f"trial-file/{trial_id}/command.json")
    assert refused.status_code == 403 and "not served" in refused.json()["error"]


def test_a_fifo_is_refused_and_a_big_log_is_streamed(live: Live) -> None:
    trial_id = live.jobs()[0]["trialJobId"]
    fifo = live.get(f"trial-file/{trial_id}/pipe", timeout=10)  # it would wait for a writer for ever
    assert fifo.status_code == 403 and "FIFO" in fifo.json()["error"]

    manager_pid = int((live.trial_dirs[0].parents[1] / "manager.lock").read_text())
    assert (
        live.get(f"trial-file/{trial_id}/seen_token").text == TOKEN
    )  # the route's first use costs memory too
    before = _peak_rss(manager_pid)
    sizes: list[int] = []

    def read() -> None:
        with httpx.stream(
            "GET", f"{live.url}/api/v1/nni/trial-file/{trial_id}/big.log", timeout=60
        ) as answer:
            assert answer.status_code == 200
            sizes.append(sum(len(chunk) for chunk in answer.iter_bytes()))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert sizes == [64 << 20] * 4
    grown = _peak_rss(manager_pid) - before
    print(f"\nfour parallel reads of a 64 MB log: the manager's peak RSS grew by {grown / (1 << 20):.1f} MB")
    assert grown < 16 << 20, "the manager held the file in memory"


def test_nothing_of_a_trial_survives_its_keeper_killed_or_stopped(live: Live) -> None:
    killed_dir, stopped_dir = live.trial_dirs
    daemons = []
    for trial_dir in live.trial_dirs:
        wait_until(lambda d=trial_dir: (d / "daemon.pid").exists(), "the daemon")
        daemons.append(int((trial_dir / "daemon.pid").read_text()))
    assert all(process_alive(pid, None) for pid in daemons)
    killed, stopped = (json.loads((d / "keeper.json").read_text()) for d in (killed_dir, stopped_dir))
    os.kill(killed["keeper_pid"], signal.SIGKILL)  # its daemon is no child of anyone trialfleet knows now
    os.kill(stopped["keeper_pid"], signal.SIGSTOP)
    live.cli.ok("trial", "kill", live.experiment_id, "--trial_id", stopped_dir.name)  # attempt 0: its id
    wait_until(
        lambda: {j["status"] for j in live.jobs()} == {"FAILED", "USER_CANCELED"},
        "the killed keeper's trial lost and the stopped keeper's trial canceled",
    )
    live.cli.ok("stop", live.experiment_id)
    for pid in daemons:
        assert not process_alive(pid, None), f"the daemon {pid} escaped its trial"
    assert processes_mentioning(live.experiment_id) == []


def _peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]
