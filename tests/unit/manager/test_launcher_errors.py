"""What `create` says when the manager it started exits before it answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trialfleet.errors import ManagerUnreachableError
from trialfleet.layout import MANAGER_STDERR_LOG
from trialfleet.manager.launcher import wait_ready
from trialfleet.storage import ExperimentStore

NOBODY = "http://127.0.0.1:9"  # the discard port: nothing answers there


def _exits_silently() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"], stderr=subprocess.DEVNULL)


def test_a_manager_that_exits_silently_is_told_by_the_reason_it_recorded(tmp_path: Path) -> None:
    store = ExperimentStore.for_experiment_dir(tmp_path)
    store.init_experiment("exp1", {"trialConcurrency": 1}, now=1.0)
    store.update_experiment(error="the manager failed: ModuleNotFoundError: No module named 'asyncssh'")
    store.close()
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / MANAGER_STDERR_LOG).write_bytes(b"")
    with pytest.raises(ManagerUnreachableError) as raised:
        wait_ready(_exits_silently(), NOBODY, tmp_path)
    assert str(raised.value) == (
        "the manager exited with code 1 while starting: the manager failed: ModuleNotFoundError: "
        f"No module named 'asyncssh' (see {tmp_path / 'log' / 'manager.log'})"
    )


def test_one_that_recorded_nothing_either_points_at_its_log(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / MANAGER_STDERR_LOG).write_bytes(b"")
    with pytest.raises(ManagerUnreachableError) as raised:
        wait_ready(_exits_silently(), NOBODY, tmp_path)
    assert "exited with code 1 while starting" in str(raised.value)
    assert str(raised.value).endswith(f"(see {tmp_path / 'log' / 'manager.log'})")


def test_the_managers_own_refusal_is_told_without_its_error_prefix(tmp_path: Path) -> None:
    """The losing ``resume`` of a race: the manager prints ``error: <why>`` and exits; the CLI says ``Error:``
    itself, so the message carries the reason alone (issue 44, item 11)."""
    (tmp_path / "log").mkdir()
    stderr_log = tmp_path / "log" / MANAGER_STDERR_LOG
    why = "experiment exp1 is run by another manager (pid 42)"
    with open(stderr_log, "ab") as err:
        loser = subprocess.Popen(
            [sys.executable, "-c", f"import sys; print('error: {why}', file=sys.stderr); raise SystemExit(1)"],
            stderr=err,
        )
    with pytest.raises(ManagerUnreachableError) as raised:
        wait_ready(loser, NOBODY, tmp_path)
    assert str(raised.value) == f"the manager exited with code 1 while starting: {why}"
