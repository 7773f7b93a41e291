"""SIGKILL the manager at random moments of a busy experiment; every restart re-adopts the running trials.

Checked afterwards: the database passes ``PRAGMA integrity_check``; every trial finished on its first
attempt (re-adopted, never re-run); each trial's stored metrics are exactly the ones it logged as sent,
once each and in order; stored parameters are the ones the trial received; sequence and parameter ids
are unique; no trial process is left.

The second test stops the experiment and SIGKILLs the manager while the stop cancels the trials, then
resumes it with two managers racing for it: one takes the experiment, the other is refused; each trial the
stop ended is re-run, none comes back canceled, and its current attempt's metrics are the ones it sent.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.hostile_clients import HostileClients
from trialfleet.config import ExperimentConfig
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, TrialRow

TRIALS = 120
CONCURRENCY = 8
METRICS_PER_TRIAL = 25
KILLS = 8

TRIAL_SCRIPT = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
log = open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "sent.log"), "a")
log.write(json.dumps({"params": params}) + "\\n"); log.flush()
for i in range(int(os.environ["METRICS_PER_TRIAL"])):
    value = params["x"] * 1000 + i
    nni.report_intermediate_result(value)
    log.write(json.dumps({"sent": value}) + "\\n"); log.flush()
    time.sleep(params["pause"])
nni.report_final_result(params["x"])
log.write(json.dumps({"final": params["x"]}) + "\\n"); log.flush()
"""


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (all held while choosing, so none is handed out twice)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def start_manager(experiment_dir: Path, action: str, port: int | None = None) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "trialfleet.manager",
        "--experiment-dir",
        str(experiment_dir),
        "--action",
        action,
        "--port",
        str(port or free_ports(1)[0]),
    ]
    log = open(experiment_dir / "log" / f"crash-test-{action}.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)


def wait_for_status(store: ExperimentStore, statuses: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = store.experiment().status.value
        if status in statuses:
            return status
        time.sleep(0.1)
    raise AssertionError(f"experiment still {store.experiment().status} after {timeout} s")


def trial_processes(experiment_dir: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(experiment_dir).encode() in cmdline and b"keeper.py" in cmdline:
                found.append(int(entry.name))
    return found


def wait_for_running_trial(store: ExperimentStore, timeout: float = 120.0) -> bool:
    """Until a trial runs (True), or the experiment is over (False)."""
    deadline = time.monotonic() + timeout
    while not store.trial_counts().get(TrialStatus.RUNNING):
        if store.experiment().status.value in ("DONE", "ERROR"):
            return False
        assert time.monotonic() < deadline, "no trial ran within the timeout"
        time.sleep(0.02)
    return True


def busy_experiment(tmp_path: Path, trials: int, pause: tuple[float, float]) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(TRIAL_SCRIPT)
    config = ExperimentConfig.for_platform(
        "local",
        trial_command=f"{sys.executable} trial.py",
        trial_code_directory=str(code),
        trial_concurrency=CONCURRENCY,
        max_trial_number=trials,
        search_space={
            "x": {"_type": "randint", "_value": [0, 10**6]},
            "pause": {"_type": "uniform", "_value": list(pause)},
        },
        tuner={"name": "Random", "class_args": {"seed": 3}},
        experiment_working_directory=str(tmp_path / "exps"),
    )
    return create_experiment(config)[1]


def sent_by(trial: TrialRow) -> list[dict[str, Any]]:
    """What the trial's current attempt logged as sent."""
    assert trial.handle is not None
    sent_log = Path(trial.handle["trial_dir"]) / "sent.log"
    return [json.loads(line) for line in sent_log.read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("hostile", [False, True], ids=["quiet", "hostile-clients"])
def test_manager_killed_at_random_moments_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: bool
) -> None:
    """``hostile-clients``: the same while the hostile clients of issue 44 (tests/integration/hostile_clients.py:
    refused trials, bad file names, slow readers, another process taking the database's write lock) are at it,
    none of them answered 500."""
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("METRICS_PER_TRIAL", str(METRICS_PER_TRIAL))  # inherited by the manager and its trials
    experiment_dir = busy_experiment(tmp_path, TRIALS, (0.001, 0.02))
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    rng = random.Random(20261122)
    port = free_ports(1)[0]  # every manager serves the same port, where the hostile clients find it
    clients = HostileClients(port, experiment_dir / "db" / "trialfleet.sqlite")

    with clients if hostile else contextlib.nullcontext():
        manager = start_manager(experiment_dir, "create", port)
        for _ in range(KILLS):
            # each kill lands while trials run (however slow the machine), at a random moment of their run
            if not wait_for_running_trial(store):
                break
            time.sleep(rng.uniform(0.0, 0.6))
            manager.send_signal(signal.SIGKILL)
            manager.wait()
            manager = start_manager(experiment_dir, "resume", port)
        wait_for_status(store, {"DONE", "ERROR"}, timeout=240)
    manager.send_signal(signal.SIGTERM)
    assert manager.wait(timeout=60) == 0
    if hostile:
        assert clients.problems == [], clients.problems
        assert clients.requests > 0

    assert store.integrity_check() == "ok"
    trials = store.trials()
    assert len(trials) == TRIALS
    assert sorted(t.sequence_id for t in trials) == list(range(TRIALS))
    assert len({t.parameter_id for t in trials}) == TRIALS
    for trial in trials:
        assert trial.status is TrialStatus.SUCCEEDED, (trial.id, trial.status, trial.message)
        assert trial.attempt == 0, f"trial {trial.id} was re-run instead of re-adopted"
        lines = sent_by(trial)
        assert lines[0]["params"] == trial.hyper_parameters
        sent = [line["sent"] for line in lines if "sent" in line]
        stored = [json.loads(m.data) for m in store.metrics(trial.id, type="PERIODICAL")]
        assert stored == sent, f"trial {trial.id}: stored metrics differ from the ones it sent"
        assert [m.sequence for m in store.metrics(trial.id, type="PERIODICAL")] == list(
            range(METRICS_PER_TRIAL)
        )
        assert [json.loads(m.data) for m in store.metrics(trial.id, type="FINAL")] == [lines[-1]["final"]]
    adopted = [e for e in store.events() if e.event == "ADOPTED"]
    assert adopted, "no kill hit a running trial: the test proved nothing"
    assert trial_processes(experiment_dir) == []
    print(
        f"\n{KILLS} kills, {len(adopted)} trial adoptions, {store.metric_count()} metrics stored exactly once"
    )


STOP_CYCLES = 6
STOP_TRIALS = 40


def racing_resumes(experiment_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Two managers resume the experiment at once: one runs it (returned, with its port), the other is refused
    by its lock."""
    ports = free_ports(2)  # a refusal must come from the experiment's lock, not from a taken port
    first, second = (start_manager(experiment_dir, "resume", port) for port in ports)
    deadline = time.monotonic() + 60
    while first.poll() is None and second.poll() is None:
        assert time.monotonic() < deadline, "neither racing manager was refused"
        time.sleep(0.02)
    refused, winner = (first, second) if first.poll() is not None else (second, first)
    assert refused.returncode != 0, "a second manager ran the experiment beside the first"
    assert winner.poll() is None, "the manager that took the lock exited"
    return winner, ports[0] if winner is first else ports[1]


@pytest.mark.slow
@pytest.mark.parametrize("hostile", [False, True], ids=["quiet", "hostile-clients"])
def test_manager_killed_while_stopping_loses_no_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: bool
) -> None:
    """``hostile-clients``: with issue 44's hostile clients at it (the database's write lock taken for 0.3 s
    every second, not held long: a stop's status must reach the database within this test's waits)."""
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("METRICS_PER_TRIAL", "10")
    experiment_dir = busy_experiment(tmp_path, STOP_TRIALS, (0.05, 0.15))
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    rng = random.Random(20261123)
    port = free_ports(1)[0]
    clients = HostileClients(port, experiment_dir / "db" / "trialfleet.sqlite", long_hold=0)

    with clients if hostile else contextlib.nullcontext():
        manager = start_manager(experiment_dir, "create", port)
        for _ in range(STOP_CYCLES):
            if not wait_for_running_trial(store):
                break
            time.sleep(rng.uniform(0.0, 0.4))
            manager.send_signal(signal.SIGTERM)  # the stop cancels every running trial...
            wait_for_status(store, {"STOPPING", "STOPPED"}, timeout=60)
            time.sleep(rng.uniform(0.0, 0.3))
            manager.send_signal(signal.SIGKILL)  # ...and the manager dies while they end
            manager.wait()
            manager, clients.port = racing_resumes(experiment_dir)
        wait_for_status(store, {"DONE", "ERROR"}, timeout=300)
    manager.send_signal(signal.SIGTERM)
    assert manager.wait(timeout=60) == 0
    if hostile:
        assert clients.problems == [], clients.problems
        assert clients.requests > 0

    assert store.integrity_check() == "ok"
    trials = store.trials()
    assert len(trials) == STOP_TRIALS
    for trial in trials:
        assert trial.status is TrialStatus.SUCCEEDED, (
            trial.id,
            trial.status,
            trial.failure_kind,
            trial.message,
        )
        lines = sent_by(trial)
        stored = [json.loads(m.data) for m in store.metrics(trial.id, type="PERIODICAL")]
        assert stored == [line["sent"] for line in lines if "sent" in line], trial.id
        assert [json.loads(m.data) for m in store.metrics(trial.id, type="FINAL")] == [lines[-1]["final"]]
    reruns = [t for t in trials if t.attempt > 0]
    assert reruns, "no stop caught a running trial: the test proved nothing"
    assert trial_processes(experiment_dir) == []
    print(f"\n{STOP_CYCLES} stops killed midway; {len(reruns)} trials re-run, none lost")
