"""Local + remote + Slurm in one experiment, through the real manager process, SIGKILLed mid-run and resumed.

The remote platform is an sshd host in a network namespace, Slurm a real single-node cluster; the manager is
the ``python -m trialfleet.manager`` process. While trials run on all three platforms the manager is
SIGKILLed, the trials go on reporting without it, and a resumed manager hands each one back to the platform
that launched it. Checked afterwards: every trial ran once, on the platform it is stored with, and succeeded;
each trial's stored metrics are exactly the ones it logged as sent, in order; the database passes ``PRAGMA
integrity_check``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet import Fleet
from slurm_cluster import SlurmCluster

from trialfleet.config import ExperimentConfig
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.testing.running import RunningExperiment

pytestmark = [pytest.mark.ssh, pytest.mark.slurm, pytest.mark.timeout(900)]

TRIALS = 12
CONCURRENCY = 6
PLATFORMS = {"local", "remote", "slurm"}

# writes what it sends to <records>/<trial id>.log, where the test reads it whatever platform ran it
TRIAL = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
log = open(os.path.join(sys.argv[1], os.environ["NNI_TRIAL_JOB_ID"] + ".log"), "a")
def note(**record):
    log.write(json.dumps(record) + "\\n"); log.flush()
note(start=params, platform=os.environ.get("NNI_PLATFORM"), slurm_job=os.environ.get("SLURM_JOB_ID"))
for step in range(12):
    value = params["x"] * 100 + step
    nni.report_intermediate_result(value)
    note(sent=value)
    time.sleep(0.4)
nni.report_final_result(params["x"])
note(final=params["x"])
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_manager(experiment_dir: Path, action: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "trialfleet.manager", "--experiment-dir", str(experiment_dir)]
    argv += ["--action", action, "--port", str(free_port()), "--foreground"]  # foreground: it exits once DONE
    log = open(experiment_dir / "log" / f"test-{action}.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)


def wait_until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not reached within {timeout} s"
        time.sleep(0.1)


def records(directory: Path, trial_id: str) -> list[dict[str, Any]]:
    path = directory / f"{trial_id}.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def sent_count(directory: Path) -> int:
    return sum(
        1 for path in directory.glob("*.log") for line in path.read_text().splitlines() if '"sent"' in line
    )


def hybrid_config(tmp_path: Path, host: dict[str, Any], records_dir: Path) -> ExperimentConfig:
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(TRIAL)
    return ExperimentConfig.from_dict(
        {
            "experimentName": "hybrid",
            "searchSpace": {"x": {"_type": "randint", "_value": [0, 10**6]}},
            "trialCommand": f"python3 trial.py {records_dir}",
            "trialCodeDirectory": str(code),
            "trialConcurrency": CONCURRENCY,
            "maxTrialNumber": TRIALS,
            "tuner": {"name": "Random", "classArgs": {"seed": 7}},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": [
                {"platform": "local"},
                {"platform": "remote", "machineList": [host], "unreachableGracePeriod": 120},
                {
                    "platform": "slurm",
                    "sharedDirectory": str(tmp_path / "shared"),
                    "pythonPath": str(Path(sys.executable).parent),
                    "cpusPerTrial": 1,
                    "memory": "100mb",
                },
            ],
        }
    )


def test_local_remote_and_slurm_run_to_completion_across_a_sigkill_of_the_manager(
    tmp_path: Path, ssh_host: Fleet, slurm: SlurmCluster
) -> None:
    records_dir = tmp_path / "records"
    records_dir.mkdir()
    _, experiment_dir = create_experiment(hybrid_config(tmp_path, ssh_host.hosts[0].machine(), records_dir))
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    manager = start_manager(experiment_dir, "create")
    try:

        def running_everywhere() -> bool:
            assert manager.poll() is None, "the manager exited"
            running = {t.platform for t in store.trials(status=TrialStatus.RUNNING)}
            return running == PLATFORMS and store.metric_count() > 0

        wait_until(running_everywhere, "trials running on local, remote and Slurm", 300)
        os.kill(manager.pid, signal.SIGKILL)
        manager.wait(30)
        sent_at_kill = sent_count(records_dir)
        running_at_kill = {t.id: t.platform for t in store.trials(status=TrialStatus.RUNNING)}
        # the trials go on without a manager; what they report meanwhile must all arrive
        wait_until(
            lambda: sent_count(records_dir) >= sent_at_kill + CONCURRENCY, "metrics sent unattended", 120
        )

        manager = start_manager(experiment_dir, "resume")
        assert manager.wait(600) == 0, (experiment_dir / "log" / "test-resume.log").read_text()[-3000:]
    finally:
        if manager.poll() is None:
            os.kill(manager.pid, signal.SIGKILL)
            manager.wait(30)

    assert store.integrity_check() == "ok"
    assert store.experiment().status.value == "DONE"
    trials = store.trials()
    assert len(trials) == TRIALS
    assert set(Counter(t.platform for t in trials)) == PLATFORMS
    assert set(running_at_kill.values()) == PLATFORMS
    adopted = {e.trial_id for e in store.events(event="ADOPTED")}
    assert set(running_at_kill) <= adopted
    ends = {status.value for status in TrialStatus if status.is_terminal}
    for trial in trials:
        assert (trial.status, trial.attempt) == (TrialStatus.SUCCEEDED, 0), (trial.id, trial.message)
        assert [e.event for e in store.events(trial.id) if e.event in ends] == ["SUCCEEDED"], "it ended once"
        logged = records(records_dir, trial.id)
        assert [r["start"] for r in logged if "start" in r] == [trial.hyper_parameters], "it ran once"
        where = logged[0]
        assert where["platform"] == trial.platform
        assert (where["slurm_job"] is not None) == (trial.platform == "slurm")
        if trial.platform == "slurm":
            assert where["slurm_job"] == trial.handle["job_id"]  # type: ignore[index]
        stored = [json.loads(m.data) for m in store.metrics(trial.id, type="PERIODICAL")]
        assert stored == [r["sent"] for r in logged if "sent" in r], (
            f"trial {trial.id}: stored metrics differ"
        )
        assert [json.loads(m.data) for m in store.metrics(trial.id, type="FINAL")] == [
            trial.hyper_parameters["x"]
        ]
    store.close()


async def test_the_example_config_runs_as_written_with_trials_placed_by_weight(
    tmp_path: Path, ssh_host: Fleet, slurm: SlurmCluster
) -> None:
    """examples/hybrid/config.yml, with only where things go and how many trials changed."""
    example = Path(__file__).resolve().parents[3] / "examples" / "hybrid"
    data = yaml.safe_load((example / "config.yml").read_text())
    data.update(
        maxTrialNumber=6, trialConcurrency=6, experimentWorkingDirectory=str(tmp_path / "experiments")
    )
    _, remote, slurm_block = data["trainingService"]
    remote["machineList"] = [ssh_host.hosts[0].machine()]
    slurm_block["sharedDirectory"] = str(tmp_path / "shared")
    async with RunningExperiment(ExperimentConfig.from_dict(data, base_dir=example)) as experiment:
        await experiment.done()
        trials = experiment.store.trials()
        assert [t.status for t in trials] == [TrialStatus.SUCCEEDED] * 6, [t.message for t in trials]
        # all six placed at once: local's trialConcurrency (2) caps it, remote's weight 2 doubles its share
        assert Counter(t.platform for t in trials) == Counter({"remote": 3, "local": 2, "slurm": 1})
        assert all(len(experiment.store.metrics(t.id, type="PERIODICAL")) == 5 for t in trials)
