"""``trial ls`` past :data:`SUMMARY_AFTER` trials prints a summary (counts, newest, best), and ``--all`` past
:data:`PLAIN_AFTER` plain tab-separated lines; small experiments keep the one table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.server.conftest import make_config
from trialfleet.cli import trial_list
from trialfleet.cli.main import main
from trialfleet.manager.decisions import parameter_record
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric, manifest

TRIALS = 60  # more than SUMMARY_AFTER


def stopped_experiment(tmp_path: Path, trials: int, mode: str) -> str:
    tuner = {"name": "Random", "classArgs": {"seed": 1, "optimize_mode": mode}}
    experiment_id, experiment_dir = create_experiment(make_config(tmp_path, tuner=tuner))
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    for i in range(trials):
        trial_id = f"t{i:04d}"
        store.add_trial(trial_id, parameter_record(i, {"x": i}), 1000.0 + i)
        store.mark_submitted(trial_id, {"pid": i}, "local:/t", 1000.5 + i, running=True)
        if i % 4 == 3:
            continue  # still running
        value = (i * 37 % 101) / 100  # every value differs
        store.add_metrics([NewMetric(trial_id, i, "FINAL", 0, str(value), 1001.0 + i, final_value=value)], {})
        store.end_trial(trial_id, TrialStatus.SUCCEEDED, 1001.0 + i)
    store.update_experiment(status="STOPPED")
    store.close()
    manifest.upsert(experiment_id, status="STOPPED")
    return experiment_id


def listed_ids(out: str) -> list[str]:
    return [word for line in out.splitlines() for word in line.replace("│", " ").split() if word[:2] == "t0"]


@pytest.mark.parametrize("mode", ["maximize", "minimize"])
@pytest.mark.slow
def test_a_large_experiment_lists_counts_newest_and_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    experiment_id = stopped_experiment(tmp_path, TRIALS, mode)
    assert main(["trial", "ls", experiment_id]) == 0
    out = capsys.readouterr().out
    assert f"{TRIALS} trials (RUNNING 15, SUCCEEDED 45)" in out
    values = {f"t{i:04d}": (i * 37 % 101) / 100 for i in range(TRIALS) if i % 4 != 3}
    best = sorted(values, key=values.__getitem__, reverse=mode == "maximize")[: trial_list.SHOWN]
    newest = [f"t{i:04d}" for i in range(TRIALS - 1, TRIALS - 1 - trial_list.SHOWN, -1)]
    assert listed_ids(out) == newest + best
    assert f"{TRIALS - trial_list.SHOWN} more" in out and "--all" in out


@pytest.mark.slow
def test_all_lists_every_trial_in_plain_lines_past_the_table_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(trial_list, "PLAIN_AFTER", 20)
    experiment_id = stopped_experiment(tmp_path, TRIALS, "maximize")
    assert main(["trial", "ls", experiment_id, "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split("\t")[:3] == ["trial", "#", "status"]
    rows = [line.split("\t") for line in lines[2:]]
    assert [row[0] for row in rows] == [f"t{i:04d}" for i in range(TRIALS)]
    assert rows[3][2] == "RUNNING" and rows[2][2] == "SUCCEEDED"
    assert main(["trial", "ls", experiment_id, "--head", "2", "--json"]) == 0


def test_a_small_experiment_keeps_the_one_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    experiment_id = stopped_experiment(tmp_path, 8, "maximize")
    assert main(["trial", "ls", experiment_id]) == 0
    out = capsys.readouterr().out
    assert listed_ids(out) == [f"t{i:04d}" for i in range(8)] and "more:" not in out
