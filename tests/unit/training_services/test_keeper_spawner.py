"""The keeper spawner (``trial_keeper/spawner.py``): keepers forked from one process per experiment must be what
``python3 -I -S keeper.py <dir>`` would start, and the local platform must go on without the spawner."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from training_service_helpers import HANG_GUARD

from trialfleet.errors import PlatformError
from trialfleet.testing import make_context, poll_until
from trialfleet.training_services.local import LocalTrainingService
from trialfleet.training_services.local.config import LocalConfig
from trialfleet.training_services.local.spawner import SPAWNER_SCRIPT, KeeperSpawner
from trialfleet.training_services.spec import Submitted, TrialSpec
from trialfleet.trial_keeper import keeper
from trialfleet.trial_keeper.keeper import PROTOCOL


def write_command(trial_dir: Path, script: str) -> None:
    trial_dir.mkdir(parents=True, exist_ok=True)
    command: dict[str, Any] = {
        "argv": ["/bin/bash", "-c", script],
        "cwd": str(trial_dir),
        "env": {},
        "env_unset": [],
    }
    command |= {"max_duration": None, "kill_grace": 5, "protocol": PROTOCOL}
    (trial_dir / "command.json").write_text(json.dumps(command))


def wait_for(path: Path) -> dict:
    deadline = time.monotonic() + HANG_GUARD
    while not path.exists():
        assert time.monotonic() < deadline, f"stuck: {path} never appeared"
        time.sleep(0.02)
    return json.loads(path.read_text())


@pytest.fixture
def spawner(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A spawner for the trials directory ``tmp_path``: the tests' trial directories are below it."""
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(SPAWNER_SCRIPT), str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    yield process
    for trial_dir in tmp_path.iterdir():  # a test that failed half-way leaves its trial waiting for this
        if trial_dir.is_dir():
            (trial_dir / "release").touch()
    process.kill()
    process.wait()


def ask(spawner: subprocess.Popen[bytes], trial_dir: Path) -> str:
    assert spawner.stdin is not None and spawner.stdout is not None
    spawner.stdin.write(f"{trial_dir}\n".encode())
    spawner.stdin.flush()
    return spawner.stdout.readline().decode().strip()


def open_pipes(pid: int) -> set[str]:
    """The pipes ``pid`` holds open. A descriptor the process closes between the listing and its readlink
    (the keeper opens and closes files as it supervises) is not one of them."""
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


def test_a_forked_keeper_is_a_keeper_of_its_own(tmp_path: Path, spawner: subprocess.Popen[bytes]) -> None:
    trial_dir = tmp_path / "t1"
    write_command(trial_dir, "echo out; echo err >&2; while [ ! -e release ]; do sleep 0.02; done; exit 3")
    pid = int(ask(spawner, trial_dir))
    record = wait_for(trial_dir / "keeper.json")
    fields = keeper.proc_fields(pid)
    assert fields is not None
    assert record["keeper_pid"] == pid and int(fields[1]) == spawner.pid  # forked, not exec'd by a shell
    # a process group of its own, in the spawner's session, where its trial is too (a group of its own): the
    # experiment's keepers and trials are one session, which the scheduler's autogroup weighs as one
    assert int(fields[2]) == pid and int(fields[3]) == os.getsid(spawner.pid)
    trial_fields = keeper.proc_fields(record["pid"])
    assert trial_fields is not None and record["pgid"] == record["pid"]
    assert (int(trial_fields[2]), int(trial_fields[3])) == (record["pid"], os.getsid(spawner.pid))
    assert not open_pipes(pid) & open_pipes(spawner.pid)  # nothing of the spawner's stays open
    assert Path(f"/proc/{pid}/fd/0").resolve() == Path(os.devnull)
    assert Path(f"/proc/{pid}/fd/1").resolve() == (trial_dir / "keeper.log").resolve()
    assert str(tmp_path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()  # ps tells whose keeper it is
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "trial-keeper"
    (trial_dir / "release").touch()
    result = wait_for(trial_dir / "result.json")
    assert (result["exit_code"], result["reason"]) == (3, "exit code 3")
    assert (trial_dir / "trial.stdout").read_text() == "out\n" and (
        trial_dir / "trial.stderr"
    ).read_text() == "err\n"


def test_a_cancel_sent_at_once_is_not_lost(tmp_path: Path, spawner: subprocess.Popen[bytes]) -> None:
    trial_dir = tmp_path / "t1"
    write_command(trial_dir, "sleep 30")
    pid = int(ask(spawner, trial_dir))
    os.kill(pid, signal.SIGTERM)  # before the keeper could have set anything up
    result = wait_for(trial_dir / "result.json")
    assert result["canceled"] is True


def test_keepers_run_on_when_the_spawner_ends(tmp_path: Path, spawner: subprocess.Popen[bytes]) -> None:
    trial_dir = tmp_path / "t1"
    write_command(trial_dir, "while [ ! -e release ]; do sleep 0.02; done")
    pid = int(ask(spawner, trial_dir))
    wait_for(trial_dir / "keeper.json")
    assert spawner.stdin is not None
    spawner.stdin.close()  # the manager's end of the pipe closes: a stop, or a crash
    assert spawner.wait(HANG_GUARD) == 0
    assert keeper.process_alive(pid, None)
    (trial_dir / "release").touch()
    assert wait_for(trial_dir / "result.json")["exit_code"] == 0


def test_a_keeper_that_cannot_start_is_an_error_line(
    tmp_path: Path, spawner: subprocess.Popen[bytes]
) -> None:
    answer = ask(spawner, tmp_path / "missing")
    assert answer.startswith("error: ") and "keeper.log" in answer
    outside = tmp_path.parent / f"{tmp_path.name}-other" / "t1"
    write_command(outside, "true")
    assert ask(spawner, outside) == f"error: {outside} is not a directory of {tmp_path}"
    assert not (outside / "keeper.log").exists()
    write_command(tmp_path / "next", "true")  # and the spawner goes on
    assert int(ask(spawner, tmp_path / "next")) > 0
    assert wait_for(tmp_path / "next" / "result.json")["exit_code"] == 0


RECORD = json.dumps({"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}})


async def test_the_local_platform_goes_on_without_its_spawner(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    config = LocalConfig(trial_command="unused", trial_code_directory=code)
    service = LocalTrainingService(make_context(tmp_path / "e", config, "exp1"))
    await service.start()
    try:
        first = await service.submit(TrialSpec("t1", 0, "true", code, RECORD))
        assert isinstance(first, Submitted)
        spawner = service._spawner
        assert spawner is not None and spawner._process is not None
        assert keeper.proc_fields(first.handle["keeper_pid"])[1] == str(spawner._process.pid)  # type: ignore[index]
        spawner._process.kill()
        await spawner._process.wait()
        with caplog.at_level(logging.WARNING):
            second = await service.submit(TrialSpec("t2", 0, "echo second", code, RECORD))
        assert isinstance(second, Submitted)
        assert "each keeper starts its own interpreter" in caplog.text
        assert keeper.proc_fields(second.handle["keeper_pid"])[1] == str(os.getpid())  # type: ignore[index]
        seen = await poll_until(service, lambda s: {"t1", "t2"} <= set(s.ended))
    finally:
        await service.close()
    assert {seen.ended[t].status.value for t in ("t1", "t2")} == {"SUCCEEDED"}
    assert (tmp_path / "e" / "trials" / "t2" / "trial.stdout").read_text() == "second\n"


async def test_a_keeper_the_spawner_cannot_start_is_that_trials_error_only(tmp_path: Path) -> None:
    spawner = KeeperSpawner(tmp_path, tmp_path / "keeper-spawner.log")
    await spawner.open()
    try:
        with pytest.raises(PlatformError, match=r"cannot start the trial keeper in .*missing: .*keeper\.log"):
            await spawner.start(tmp_path / "missing")
        write_command(tmp_path / "t1", "true")
        pid = await spawner.start(tmp_path / "t1")  # the spawner serves the next trial
        assert pid > 0 and wait_for(tmp_path / "t1" / "result.json")["exit_code"] == 0
    finally:
        await spawner.close()
