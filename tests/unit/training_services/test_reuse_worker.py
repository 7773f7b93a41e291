"""The reuse-mode worker (``trial_keeper/worker.py``) as a real process over a real directory: it takes each
attempt once, cancels one trial and goes on, records a keeper that died, and ends when idle or released."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_keeper_spawner import wait_for
from training_service_helpers import HANG_GUARD

from trialfleet.training_services.support import WORKER_SCRIPT
from trialfleet.trial_keeper.keeper import PROTOCOL, process_alive


def prepare(trials: Path, name: str, script: str) -> Path:
    trial_dir = trials / name
    trial_dir.mkdir(parents=True)
    command: dict[str, Any] = {
        "argv": ["/bin/bash", "-c", script],
        "cwd": str(trial_dir),
        "env": {"OWN": name},
    }
    command |= {"env_unset": [], "max_duration": None, "kill_grace": 2, "protocol": PROTOCOL}
    (trial_dir / "command.json").write_text(json.dumps(command))
    return trial_dir


def assign(worker_dir: Path, name: str) -> None:
    (worker_dir / "inbox").mkdir(parents=True, exist_ok=True)
    (worker_dir / "inbox" / name).touch()


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "workers" / "w1", tmp_path / "trials"


def start(dirs: tuple[Path, Path], idle: float = 60) -> subprocess.Popen[bytes]:
    worker_dir, trials = dirs
    worker_dir.mkdir(parents=True, exist_ok=True)
    trials.mkdir(exist_ok=True)
    argv = [sys.executable, "-I", "-S", str(WORKER_SCRIPT), str(worker_dir), str(trials), str(idle)]
    return subprocess.Popen(argv)


@pytest.fixture
def running(dirs: tuple[Path, Path]) -> Iterator[subprocess.Popen[bytes]]:
    process = start(dirs)
    yield process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(HANG_GUARD)


def test_trials_run_one_after_another_each_once_with_its_own_environment(
    dirs: tuple[Path, Path], running: subprocess.Popen[bytes]
) -> None:
    worker_dir, trials = dirs
    for name in ("a", "b"):
        prepare(trials, name, 'echo "$OWN" > own')
        assign(worker_dir, name)
        assert wait_for(trials / name / "result.json")["exit_code"] == 0
        assert (trials / name / "own").read_text() == f"{name}\n"
    assign(worker_dir, "a")  # written again (a manager that restarted): already taken, never run twice
    (trials / "a" / "own").unlink()
    prepare(trials, "c", "true")
    assign(worker_dir, "c")
    wait_for(trials / "c" / "result.json")
    assert not (trials / "a" / "own").exists() and not (worker_dir / "inbox" / "a").exists()
    assert json.loads((worker_dir / "worker.json").read_text())["pid"] == running.pid


def test_a_cancel_ends_one_trial_and_the_worker_goes_on(
    dirs: tuple[Path, Path], running: subprocess.Popen[bytes]
) -> None:
    worker_dir, trials = dirs
    prepare(trials, "long", "echo $$ > pid; exec sleep 600")
    assign(worker_dir, "long")
    wait_for(trials / "long" / "keeper.json")
    while not (trials / "long" / "pid").exists() or not (trials / "long" / "pid").read_text().strip():
        time.sleep(0.02)
    pid = int((trials / "long" / "pid").read_text())
    (worker_dir / "cancel").mkdir(exist_ok=True)
    (worker_dir / "cancel" / "long").touch()
    assert wait_for(trials / "long" / "result.json")["canceled"] is True
    assert not process_alive(pid, None)
    prepare(trials, "never", "touch ran")  # cancelled before the worker took it: recorded, not run
    (worker_dir / "cancel" / "never").touch()
    assign(worker_dir, "never")
    assert wait_for(trials / "never" / "result.json")["canceled"] is True
    assert not (trials / "never" / "ran").exists() and running.poll() is None


def test_a_keeper_that_dies_gets_an_infrastructure_record(
    dirs: tuple[Path, Path], running: subprocess.Popen[bytes]
) -> None:
    worker_dir, trials = dirs
    prepare(trials, "victim", "exec sleep 600")
    assign(worker_dir, "victim")
    keeper = wait_for(trials / "victim" / "keeper.json")
    os.kill(keeper["keeper_pid"], signal.SIGKILL)
    result = wait_for(trials / "victim" / "result.json")
    assert result["lost"] is True and result["exit_code"] is None and result["signal"] is None
    # the trial's tree was ended for it (a zombie left to an init that does not reap counts as ended)
    assert not process_alive(keeper["pid"], keeper["start_ticks"], keeper["boot_id"])
    assert running.poll() is None


def test_the_worker_ends_when_released_or_idle(dirs: tuple[Path, Path]) -> None:
    worker_dir, _ = dirs
    released = start(dirs)
    wait_for(worker_dir / "worker.json")
    (worker_dir / "stop" / "now").touch()
    assert released.wait(HANG_GUARD) == 0
    assert json.loads((worker_dir / "ended.json").read_text())["reason"] == "released by the manager"
    (worker_dir / "ended.json").unlink()
    (worker_dir / "stop" / "now").unlink()
    idle = start(dirs, idle=0.5)
    assert idle.wait(HANG_GUARD) == 0
    assert json.loads((worker_dir / "ended.json").read_text())["reason"] == "idle for 0.5 s"


def test_a_worker_started_again_records_the_trials_it_had_taken_as_lost(dirs: tuple[Path, Path]) -> None:
    """A job requeued after a preemption runs the worker anew in the same directory: what it had taken is not
    run twice, and the manager learns it was lost."""
    worker_dir, trials = dirs
    prepare(trials, "taken", "touch ran")
    (worker_dir / "claimed").mkdir(parents=True)
    (worker_dir / "claimed" / "taken").touch()  # taken by the last run, which was stopped before it ended
    prepare(trials, "done", "true")
    (trials / "done" / "result.json").write_text(json.dumps({"exit_code": 0}))
    (worker_dir / "claimed" / "done").touch()
    worker = start(dirs, idle=0.5)
    assert worker.wait(HANG_GUARD) == 0
    result = json.loads((trials / "taken" / "result.json").read_text())
    assert result["lost"] is True and not (trials / "taken" / "ran").exists()
    assert json.loads((trials / "done" / "result.json").read_text()) == {"exit_code": 0}


def test_the_worker_looks_often_for_the_next_trial_right_after_one_ended(dirs: tuple[Path, Path]) -> None:
    """The manager gives the next trial as soon as it saw one end: that is when the inbox is looked at often."""
    from trialfleet.trial_keeper import worker as worker_module

    worker_dir, trials = dirs
    worker = worker_module.Worker(str(worker_dir), str(trials), 60.0)
    assert worker.tick() == worker_module.TICK
    trials.mkdir()
    (trials / "done").mkdir()
    (trials / "done" / "result.json").write_text(json.dumps({"exit_code": 0}))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: stands for a keeper that ended
        os._exit(0)
    worker.running[pid] = "done"
    wait_for_reaped = time.monotonic() + HANG_GUARD
    while worker.running and time.monotonic() < wait_for_reaped:
        worker.reap()
        time.sleep(0.01)
    assert not worker.running
    assert worker.tick() == worker_module.EAGER_TICK < worker_module.TICK
    worker.ended_at -= worker_module.EAGER_FOR
    assert worker.tick() == worker_module.TICK
