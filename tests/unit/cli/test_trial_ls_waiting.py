"""``trial ls`` says why its WAITING trials wait (the reason REST and the web UI show as the trial's message):
in the one table, in the summary of a large experiment, and in ``--all``'s plain lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.server.conftest import make_config
from trialfleet.cli import trial_list
from trialfleet.cli.main import main
from trialfleet.manager.decisions import parameter_record
from trialfleet.manager.launcher import create_experiment
from trialfleet.storage import ExperimentStore, manifest

FULL = "OpenPAI virtual cluster 'default' is full (4 of 4 GPUs used)"
QUOTA = "Kubernetes quota 'team-a' exceeded: requests.nvidia.com/gpu"


def waiting_experiment(tmp_path: Path, trials: int) -> str:
    """``trials`` trials, every one WAITING: the even ones for a full cluster, the odd ones for a quota."""
    experiment_id, experiment_dir = create_experiment(make_config(tmp_path))
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    for i in range(trials):
        trial_id = f"t{i:04d}"
        store.add_trial(trial_id, parameter_record(i, {"x": i}), 1000.0 + i)
        store.set_waiting_reason(trial_id, QUOTA if i % 2 else FULL, 1000.5 + i)
    store.update_experiment(status="STOPPED")
    store.close()
    manifest.upsert(experiment_id, status="STOPPED")
    return experiment_id


@pytest.mark.parametrize("trials", [3, trial_list.SUMMARY_AFTER + 4])
def test_trial_ls_says_why_trials_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], trials: int
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "300")
    experiment_id = waiting_experiment(tmp_path, trials)
    assert main(["trial", "ls", experiment_id]) == 0
    out = capsys.readouterr().out
    evens, odds = (trials + 1) // 2, trials // 2
    assert f"waiting ({evens}: t0000, t0002" in out and f"): {FULL}" in out
    assert f"waiting ({odds}: t0001" in out and f"): {QUOTA}" in out


def test_all_in_plain_lines_says_why_trials_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(trial_list, "PLAIN_AFTER", 2)
    experiment_id = waiting_experiment(tmp_path, 3)
    assert main(["trial", "ls", experiment_id, "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"# waiting (2: t0000, t0002): {FULL}" in lines
    assert f"# waiting (1: t0001): {QUOTA}" in lines
