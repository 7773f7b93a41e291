"""nnictl's experiment id rules, over a real manifest file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trialfleet.client import resolve_experiment, resolve_running
from trialfleet.errors import ExperimentNotFoundError, ExperimentStateError
from trialfleet.storage import manifest


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture(autouse=True)
def experiments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_pid: int) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    live = os.getpid()  # this process stands for a live manager
    manifest.upsert("abc12345", status="RUNNING", pid=live, port=9001, startTime=1)
    manifest.upsert("abd67890", status="RUNNING", pid=live, port=9002, startTime=2)
    manifest.upsert("xyz00000", status="RUNNING", pid=dead_pid, port=9003, startTime=3)


def test_exact_and_prefix_match() -> None:
    assert resolve_experiment("abc12345").id == "abc12345"
    assert resolve_experiment("abc").id == "abc12345"
    assert resolve_experiment("xyz").id == "xyz00000"


def test_dead_manager_is_stopped_without_port() -> None:
    ref = resolve_experiment("xyz00000")
    assert ref.status == "STOPPED" and not ref.running and "port" not in ref.entry


def test_ambiguous_prefix_lists_the_candidates() -> None:
    with pytest.raises(ExperimentNotFoundError) as caught:
        resolve_experiment("ab")
    assert "abc12345" in str(caught.value) and "abd67890" in str(caught.value)


def test_no_match() -> None:
    with pytest.raises(ExperimentNotFoundError, match="no experiment matches 'q'"):
        resolve_experiment("q")


def test_omitted_id_needs_exactly_one_running_experiment() -> None:
    with pytest.raises(ExperimentNotFoundError, match="2 experiments running"):
        resolve_experiment(None)
    manifest.remove("abd67890")
    assert resolve_experiment(None).id == "abc12345"
    manifest.remove("abc12345")
    with pytest.raises(ExperimentNotFoundError, match="no experiment running"):
        resolve_experiment(None)


def test_stop_targets() -> None:
    assert [r.id for r in resolve_running(None, every=True)] == ["abc12345", "abd67890"]
    assert [r.id for r in resolve_running("ab*")] == ["abc12345", "abd67890"]
    assert [r.id for r in resolve_running(None, port=9002)] == ["abd67890"]
    assert [r.id for r in resolve_running("abd")] == ["abd67890"]
    with pytest.raises(ExperimentStateError, match="not running"):
        resolve_running("xyz")
    with pytest.raises(ExperimentNotFoundError, match="use --all"):
        resolve_running("all")
    with pytest.raises(ExperimentNotFoundError, match="port 9999"):
        resolve_running(None, port=9999)
