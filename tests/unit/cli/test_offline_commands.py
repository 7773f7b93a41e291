"""CLI commands on a stopped experiment, read from its database (no manager), run in-process through main()."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.server.conftest import make_config, populate
from trialfleet.cli.main import main
from trialfleet.manager.launcher import create_experiment
from trialfleet.storage import ExperimentStore, manifest


@pytest.fixture
def stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    experiment_id, experiment_dir = create_experiment(make_config(tmp_path))
    trial_dir = experiment_dir / "trials" / "sA"
    trial_dir.mkdir(parents=True)
    (trial_dir / "trial.stdout").write_text("hello stdout\n")
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    populate(store, trial_dir)
    store.update_experiment(status="STOPPED")
    store.close()
    manifest.upsert(experiment_id, status="STOPPED")
    return experiment_id, experiment_dir


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_trial_ls_json_with_nnictl_dates(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, _ = stopped
    code, out, _ = run(capsys, "trial", "ls", experiment_id, "--json")
    assert code == 0
    jobs = json.loads(out)
    assert [j["trialJobId"] for j in jobs] == ["sA", "fB", "rC", "wD"]
    assert jobs[0]["startTime"].count("/") == 2 and jobs[0]["startTime"].count(":") == 2
    _, out, _ = run(capsys, "trial", "ls", experiment_id[:3], "--head", "1", "--json")
    assert [j["trialJobId"] for j in json.loads(out)] == ["sA"]  # only trials with final results
    code, out, _ = run(capsys, "trial", "ls", experiment_id)
    assert code == 0 and "sA" in out and "SUCCEEDED" in out and "0.25" in out


@pytest.mark.slow
def test_show_status_config_and_export(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    experiment_id, experiment_dir = stopped
    _, out, _ = run(capsys, "experiment", "show", experiment_id)
    profile = json.loads(out)
    assert profile["id"] == experiment_id and profile["logDir"] == str(experiment_dir)
    _, out, _ = run(capsys, "experiment", "status", experiment_id)
    assert json.loads(out) == {"status": "STOPPED", "errors": []}
    _, out, _ = run(capsys, "config", "show", experiment_id)
    assert json.loads(out)["trialConcurrency"] == 2
    target = tmp_path / "out.csv"
    code, _, _ = run(capsys, "experiment", "export", experiment_id, "-t", "csv", "-f", str(target))
    assert code == 0
    assert target.read_text().splitlines() == ["x,default,loss,trialJobId", "0.25,0.25,0.75,sA"]


def test_trial_log_from_the_trial_directory(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, experiment_dir = stopped
    code, out, _ = run(capsys, "log", "trial", experiment_id, "-T", "sA", "--stdout")
    assert code == 0
    assert f"id:sA path:local:{experiment_dir}/trials/sA" in out
    assert "hello stdout" in out
    code, _, err = run(capsys, "log", "trial", experiment_id, "-T", "nope")
    assert code == 1 and "no trial nope" in err


@pytest.mark.slow
def test_log_path_names_the_log_files_instead_of_printing_them(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, experiment_dir = stopped
    log_dir = experiment_dir / "log"
    (log_dir / "manager.log").write_text("the manager's line\n")
    (log_dir / "nnictl_stderr.log").write_text("the detached process's stderr\n")
    code, out, _ = run(capsys, "log", "stdout", experiment_id, "--path")
    assert code == 0 and out.splitlines() == [str(log_dir / "manager.log")]
    code, out, _ = run(capsys, "log", "stderr", experiment_id, "--path")
    assert code == 0 and out.splitlines() == [str(log_dir / "nnictl_stderr.log")]
    code, out, _ = run(capsys, "log", "stdout", experiment_id)
    assert code == 0 and "the manager's line" in out


def test_webui_url_of_a_stopped_experiment_is_refused(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, _ = stopped
    code, _, err = run(capsys, "webui", "url", experiment_id)
    assert code == 2 and "not running" in err and f"trialfleet view {experiment_id}" in err


def test_changes_to_a_stopped_experiment_are_refused(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, _ = stopped
    code, _, err = run(capsys, "update", "concurrency", experiment_id, "--value", "3")
    assert code == 2 and "not running" in err and f"trialfleet resume {experiment_id}" in err
    assert "Traceback" not in err
    code, _, err = run(capsys, "trial", "kill", experiment_id, "-T", "rC")
    assert code == 2 and "not running" in err


def test_no_running_experiment(stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "trial", "ls")
    assert code == 2 and "no experiment running" in err
    code, out, _ = run(capsys, "stop", "--all")
    assert code == 0 and "There is no experiment running." in out


def test_delete(stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    experiment_id, experiment_dir = stopped
    code, out, _ = run(capsys, "experiment", "list", "--all", "--json")
    assert [e["id"] for e in json.loads(out)] == [experiment_id]
    code, _, _ = run(capsys, "experiment", "delete", experiment_id, "--yes")
    assert code == 0
    assert not experiment_dir.exists()
    _, out, _ = run(capsys, "experiment", "list", "--all", "--json")
    assert json.loads(out) == []


@pytest.mark.slow
def test_version_does_not_load_the_server() -> None:
    script = (
        "import sys\n"
        "from trialfleet.cli.main import main\n"
        "code = main(['--version'])\n"
        "heavy = [m for m in ('fastapi', 'uvicorn', 'pydantic', 'httpx', 'rich.table') if m in sys.modules]\n"
        "print(code, heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    version, summary = result.stdout.splitlines()
    assert version.count(".") >= 2
    assert summary == "0 []"


def test_a_killed_manager_s_experiment_lists_its_end(
    stopped: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    experiment_id, experiment_dir = stopped
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    store.update_experiment(now=1_700_000_123.5, event="EXPERIMENT_RUNNING", status="RUNNING", end_time=None)
    store.close()
    manifest.upsert(experiment_id, status="RUNNING", endTime=None)  # as a SIGKILLed manager leaves it
    _, out, _ = run(capsys, "experiment", "list", "--all", "--json")
    (entry,) = json.loads(out)
    assert entry["status"] == "STOPPED" and entry["endTime"] == 1_700_000_123_500
    _, out, _ = run(capsys, "experiment", "list", "--all")
    assert "2023/11/1" in out  # the end column is filled (local time zone: the 14th or 15th)
