"""The containers' entry point, run as a container runs it (``python3 -I -S entrypoint.py …``) with the real keeper:
its replica's directory, an exit status mirroring the trial's, a cancel passed on, a replica never run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trialfleet.compat import REAL_NNI_PROBE
from trialfleet.training_services import environment
from trialfleet.training_services.kubernetes import entrypoint
from trialfleet.training_services.trial_dir import (
    KEEPER_SCRIPT,
    command_record,
    input_files,
    write_trial_inputs,
)

SCRIPT = Path(entrypoint.__file__)


def test_it_keeps_the_platform_layers_constants() -> None:
    """A standalone copy of what it shares with trialfleet: kept equal by this test."""
    assert entrypoint.REAL_NNI_PROBE == REAL_NNI_PROBE
    assert entrypoint.CHANNEL_VARIABLES == environment.CHANNEL_VARIABLES


@pytest.mark.parametrize(
    ("result", "status"),
    [
        ({"exit_code": 0}, 0),
        ({"exit_code": 3}, 3),
        ({"exit_code": None, "signal": 9}, 137),
        ({"exit_code": None, "signal": 15, "canceled": True}, 143),
        ({"exit_code": None, "timed_out": True}, 124),
        ({"exit_code": None}, 1),
    ],
)
def test_the_exit_status_is_the_trials(tmp_path: Path, result: dict[str, object], status: int) -> None:
    (tmp_path / "result.json").write_text(json.dumps(result))
    assert entrypoint.exit_status(str(tmp_path), 0) == status


def test_without_a_record_the_keepers_death_shows() -> None:
    assert entrypoint.exit_status("/nonexistent", -9) == 137
    assert entrypoint.exit_status("/nonexistent", 1) == 1


def test_replica_directories() -> None:
    assert entrypoint.replica_dir("/t", "master", "master", "0") == "/t"
    assert entrypoint.replica_dir("/t", "worker", "master", "0") == "/t/replicas/worker-0"
    assert entrypoint.replica_dir("/t", "worker", "worker", "1") == "/t/replicas/worker-1"
    assert entrypoint.replica_dir("/t", "worker", "worker", "") == "/t"


def prepare(trial_dir: Path, command: str, roles: tuple[str, ...] = ("worker",)) -> None:
    record = command_record(["/bin/bash", "-c", command], str(trial_dir), None)
    files = input_files(json.dumps({"parameter_id": 1, "parameters": {}}), record)
    for role in roles:
        files[f"command.{role}.json"] = json.dumps(record)
    write_trial_inputs(trial_dir, files)


def start(
    trial_dir: Path, role: str = "worker", index: str = "0", mode: str = "once"
) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(SCRIPT),
        str(trial_dir),
        str(KEEPER_SCRIPT),
        "/shim",
        role,
        "worker",
    ]
    env = {**os.environ, "REPLICA": index}
    return subprocess.Popen(
        [*argv, "REPLICA", mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@pytest.mark.slow
def test_the_primary_runs_in_the_trial_directory_and_exits_as_its_trial(tmp_path: Path) -> None:
    prepare(tmp_path, 'echo "$NNI_SYS_DIR $PYTHONPATH"; exit 7')
    assert start(tmp_path).wait(60) == 7
    assert (
        (tmp_path / "trial.stdout").read_text()
        == f"{tmp_path} /shim{':' + os.environ['PYTHONPATH'] if os.environ.get('PYTHONPATH') else ''}\n"
    )
    assert json.loads((tmp_path / "result.json").read_text())["exit_code"] == 7


@pytest.mark.slow
def test_another_replica_runs_in_a_directory_of_its_own(tmp_path: Path) -> None:
    prepare(tmp_path, 'echo "$NNI_SYS_DIR"')
    assert start(tmp_path, index="1").wait(60) == 0
    replica = tmp_path / "replicas" / "worker-1"
    assert (replica / "trial.stdout").read_text() == f"{replica}\n"
    assert (replica / "parameter.cfg").read_text() == (tmp_path / "parameter.cfg").read_text()
    assert not (tmp_path / "result.json").exists()


@pytest.mark.slow
def test_a_replica_does_not_run_twice_unless_restartable(tmp_path: Path) -> None:
    prepare(tmp_path, "echo ran")
    assert start(tmp_path).wait(60) == 0
    again = start(tmp_path)
    assert again.wait(60) == 1
    assert b"already ran" in (again.stdout.read() if again.stdout else b"")
    assert (tmp_path / "trial.stdout").read_text() == "ran\n"
    assert start(tmp_path, mode="restartable").wait(60) == 0
    assert (tmp_path / "trial.stdout").read_text() == "ran\nran\n"


def test_a_sigterm_cancels_the_trial_through_the_keeper(tmp_path: Path) -> None:
    prepare(tmp_path, "echo started; exec sleep 600")
    process = start(tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "keeper.json").exists():
        assert time.monotonic() < deadline and process.poll() is None, "the keeper never started the trial"
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 143
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["canceled"] is True
    trial_pid = json.loads((tmp_path / "keeper.json").read_text())["pid"]
    assert (
        not Path(f"/proc/{trial_pid}").exists()
        or "Z" in Path(f"/proc/{trial_pid}/stat").read_text().split(")")[1][:3]
    )
