"""The hosts' runners on real SSH hosts: one per host, over the open link; ends reported at once, with or
without reuse mode.

The contract suite runs in reuse mode too (test_contract_remote.py::TestRemoteReuseContract); here: what reuse
changes (no new SSH session for later trials), the end reported without waiting for a poll in both modes, a
runner killed on its host, and the real manager SIGKILLed and resumed while trials run under runners.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet import Fleet, Host
from remote_helpers import remote_context

from trialfleet.config.loader import load_config
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.storage.store import ExperimentStore
from trialfleet.testing import poll_until
from trialfleet.training_services.remote import RemoteTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

pytestmark = pytest.mark.ssh

RECORD = json.dumps(
    {"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
)
SESSION = re.compile(r"Starting session|Connection from")


def sessions(host: Host) -> int:
    """SSH sessions and connections the host's sshd has opened so far."""
    return len(SESSION.findall((host.dir / "sshd.log").read_text(errors="replace")))


def spec(trial_id: str, code_dir: Path, command: str) -> TrialSpec:
    return TrialSpec(trial_id, 0, command, code_dir, RECORD)


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    return path


async def run_one(service: RemoteTrainingService, trial: TrialSpec) -> dict[str, Any]:
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted), submitted
    seen = await poll_until(service, lambda s: trial.trial_id in s.ended)
    assert seen.ended[trial.trial_id].status is TrialStatus.SUCCEEDED
    return dict(submitted.handle)


@pytest.mark.parametrize("reuse", [True, False])
async def test_later_trials_start_without_any_new_ssh_session(
    tmp_path: Path, fleet: Fleet, code_dir: Path, reuse: bool
) -> None:
    host = fleet.hosts[0]
    service = RemoteTrainingService(remote_context(tmp_path / "e", [host], reuse_mode=reuse))
    await service.start()
    try:
        await run_one(service, spec("t0", code_dir, "true"))
        before = sessions(host)
        for i in range(1, 4):
            await run_one(service, spec(f"t{i}", code_dir, "echo later"))
        after = sessions(host)
        machine = service.machines[0]
    finally:
        await service.close()
    for i in range(1, 4):  # the logs were copied to the manager all the same
        assert (service.context.trials_dir / f"t{i}" / "trial.stdout").read_text() == "later\n"
    assert machine.runner.starts == 1  # polls, reads and watches: one runner in both modes
    if reuse:
        assert machine.probe is machine.runner
        assert after == before, f"{after - before} new SSH session(s) for three later trials"
    else:  # the comparison: each launch is an SSH session of its own
        assert after - before >= 3


@pytest.mark.parametrize("reuse", [True, False])
async def test_an_end_is_reported_without_waiting_for_the_next_poll(
    tmp_path: Path, fleet: Fleet, code_dir: Path, reuse: bool
) -> None:
    service = RemoteTrainingService(remote_context(tmp_path / "e", fleet.hosts[:1], reuse_mode=reuse))
    await service.start()
    try:
        submitted = await service.submit(spec("t0", code_dir, "sleep 0.5"))
        assert isinstance(submitted, Submitted)
        await service.poll()  # clears the wake-up; nothing has ended yet
        await asyncio.wait_for(service.wakeup.wait(), timeout=30)  # set by the host's runner, not by a poll
        ended = (await service.poll()).ended
    finally:
        await service.close()
    assert [e.trial_id for e in ended] == ["t0"]


async def test_a_killed_runner_is_restarted_and_its_trials_run_on(
    tmp_path: Path, fleet: Fleet, code_dir: Path
) -> None:
    host = fleet.hosts[0]
    marker = tmp_path / "went on"
    service = RemoteTrainingService(remote_context(tmp_path / "e", [host], reuse_mode=True))
    await service.start()
    try:
        submitted = await service.submit(spec("t0", code_dir, f"sleep 1.5; touch '{marker}'"))
        assert isinstance(submitted, Submitted)
        runner = service.machines[0].runner
        assert runner.pid is not None
        os.kill(runner.pid, signal.SIGKILL)
        seen = await poll_until(service, lambda s: "t0" in s.ended)
        assert seen.ended["t0"].status is TrialStatus.SUCCEEDED and marker.exists()
        await run_one(service, spec("t1", code_dir, "true"))
    finally:
        await service.close()
    assert runner.starts == 2


TRIAL = """
import json, os, time
import nni
params = nni.get_next_parameter()
sent = open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "sent.log"), "a")
for i in range(8):
    nni.report_intermediate_result(params["x"] * 100 + i)
    sent.write(json.dumps(params["x"] * 100 + i) + "\\n"); sent.flush()
    time.sleep(0.15)
nni.report_final_result(params["x"])
"""
TRIALS = 9


def start_manager(experiment_dir: Path, action: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "trialfleet.manager", "--experiment-dir", str(experiment_dir)]
    log = open(experiment_dir / "log" / f"reuse-{action}.log", "ab")  # noqa: SIM115 - owned by the child
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return subprocess.Popen([*argv, "--action", action, "--port", str(port)], stdout=log, stderr=log)


def wait_for(store: ExperimentStore, condition: Any, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)


def runners_of(experiment_id: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmdline and any(experiment_id.encode() in part for part in cmdline):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_manager_sigkilled_and_resumed_in_reuse_mode_loses_nothing(
    tmp_path: Path, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL)
    config = {
        "searchSpace": {"x": {"_type": "randint", "_value": [0, 1_000_000]}},
        "trialCommand": "python3 trial.py",
        "trialCodeDirectory": "code",
        "trialConcurrency": 3,
        "maxTrialNumber": TRIALS,
        "tuner": {"name": "Random", "classArgs": {"seed": 11}},
        "experimentWorkingDirectory": str(tmp_path / "experiments"),
        "trainingService": {
            "platform": "remote",
            "reuseMode": True,
            "machineList": [h.machine() for h in fleet.hosts],
        },
    }
    (tmp_path / "config.yml").write_text(yaml.safe_dump(config))
    experiment_id, experiment_dir = create_experiment(load_config(tmp_path / "config.yml").config)
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    manager = start_manager(experiment_dir, "create")
    for _ in range(2):  # killed while trials run under the hosts' runners
        wait_for(store, lambda: store.trial_counts().get(TrialStatus.RUNNING), "a running trial")
        wait_for(store, lambda: runners_of(experiment_id), "a runner")
        manager.send_signal(signal.SIGKILL)
        manager.wait()
        manager = start_manager(experiment_dir, "resume")
    wait_for(store, lambda: store.experiment().status.value in ("DONE", "ERROR"), "the end", timeout=300)
    manager.send_signal(signal.SIGTERM)
    assert manager.wait(timeout=60) == 0

    trials = store.trials()
    assert len(trials) == TRIALS
    for trial in trials:
        assert trial.status is TrialStatus.SUCCEEDED and trial.attempt == 0, (trial.id, trial.status)
        assert trial.handle is not None
        sent_log = fleet.host_of(dict(trial.handle)).local(
            posixpath.join(trial.handle["trial_dir"], "sent.log")
        )
        sent = [json.loads(line) for line in sent_log.read_text().splitlines()]
        assert [json.loads(m.data) for m in store.metrics(trial.id, type="PERIODICAL")] == sent
    assert any(e.event == "ADOPTED" for e in store.events()), "no kill hit a running trial"
    wait_for(store, lambda: not runners_of(experiment_id), "the runners' exit", timeout=30)
