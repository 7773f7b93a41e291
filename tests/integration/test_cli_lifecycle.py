"""The real ``trialfleet`` console script driving an NNI-style experiment: create (detached), trial ls, REST,
trial kill, export, import, logs, list, stop (no process left), resume, update, view."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
import sqlite3
from pathlib import Path

import httpx

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until, write_experiment
from trialfleet.storage.store import DB_RELATIVE_PATH


def _statuses(cli: Cli, experiment_id: str) -> list[str]:
    return [job["status"] for job in cli.json("trial", "ls", experiment_id, "--json")]


def _status(cli: Cli, experiment_id: str) -> str:
    return str(cli.json("experiment", "status", experiment_id)["status"])


def _assert_nothing_left(experiment_id: str, experiment_dir: Path) -> None:
    assert processes_mentioning(str(experiment_dir)) == []
    assert processes_mentioning(f"NNI_EXP_ID={experiment_id}") == []


def test_experiment_lifecycle_through_the_cli(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=True)
    port = free_port()

    created = cli.ok("create", "--config", str(config), "--port", str(port))
    match = re.search(r"Experiment ID: (\w+)", created)
    assert match, created
    experiment_id = match.group(1)
    assert f"trialfleet stop {experiment_id}" in created and f"http://127.0.0.1:{port}" in created
    experiment_dir = tmp_path / "experiments" / experiment_id

    wait_until(lambda: _statuses(cli, experiment_id).count("RUNNING") == 4, "4 running trials")
    jobs = httpx.get(f"http://127.0.0.1:{port}/api/v1/nni/trial-jobs", timeout=20).json()
    assert len(jobs) == 4
    assert all(json.loads(job["hyperParameters"][0])["parameter_source"] == "algorithm" for job in jobs)

    victim = jobs[0]["trialJobId"]
    assert "success" in cli.ok(
        "trial", "kill", "--trial_id", victim
    )  # the running experiment is found without its id
    wait_until(lambda: cli.json("trial", "ls", "--json")[0]["status"] == "USER_CANCELED", "the kill")

    (tmp_path / "code" / "hold").unlink()
    wait_until(lambda: _status(cli, experiment_id) == "DONE", "the experiment to be DONE")
    assert sorted(_statuses(cli, experiment_id)) == ["SUCCEEDED"] * 5 + ["USER_CANCELED"]

    cli.ok("experiment", "export", experiment_id, "--type", "csv", "--filename", "out.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out.csv").read_text())))
    assert len(rows) == 5
    assert list(rows[0]) == ["x", "default", "loss", "trialJobId"]
    assert {r["x"] for r in rows} == {r["default"] for r in rows}
    cli.ok("experiment", "export", experiment_id, "-t", "json", "-f", "out.json", "--intermediate")
    exported = json.loads((tmp_path / "out.json").read_text())
    assert {r["trialJobId"] for r in exported} == {r["trialJobId"] for r in rows}
    assert all(len(r["intermediate"]) == 3 for r in exported)
    assert json.loads(exported[0]["value"])["default"] == exported[0]["parameter"]["x"]

    (tmp_path / "import.json").write_text(json.dumps([{"parameter": {"x": 0.5}, "value": 0.5}]))
    assert "Import data success" in cli.ok("experiment", "import", experiment_id, "-f", "import.json")
    imported = httpx.get(f"http://127.0.0.1:{port}/api/v1/nni/experiment/imported-data", timeout=20).json()
    assert [json.loads(i) for i in imported] == [[{"parameter": {"x": 0.5}, "value": 0.5}]]
    assert "DONE" in cli.ok("log", "stdout", experiment_id, "--tail", "50")  # the manager's log

    assert experiment_id in cli.ok("experiment", "list")
    assert "Stop experiment success." in cli.ok("stop", experiment_id[:4])  # an id prefix is enough
    _assert_nothing_left(experiment_id, experiment_dir)
    # its manager closed the store: the database file holds everything on its own (a copy of it alone loses nothing)
    database = experiment_dir / DB_RELATIVE_PATH
    assert not database.with_name(f"{database.name}-wal").exists()
    shutil.copy(database, tmp_path / "copy.sqlite")
    with contextlib.closing(sqlite3.connect(tmp_path / "copy.sqlite")) as copy:
        assert copy.execute("SELECT count(*) FROM trials").fetchone() == (6,)
        assert copy.execute("SELECT count(*) FROM metrics WHERE type = 'FINAL'").fetchone() == (5,)
    assert cli.json("experiment", "list", "--all", "--json")[0]["status"] == "STOPPED"
    assert len(cli.json("trial", "ls", experiment_id, "--json")) == 6  # read from the database

    # resume: the budget is raised, so the tuner proposes more trials from where it stopped
    resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))
    assert (
        "Resumed: 0 running trial(s) re-adopted, 0 stopped trial(s) re-run, 0 waiting trial(s) queued"
        in resumed
    )
    cli.ok("update", "trialnum", experiment_id, "--value", "8")
    wait_until(
        lambda: len(_statuses(cli, experiment_id)) == 8 and _status(cli, experiment_id) == "DONE",
        "8 trials after resume",
    )
    cli.ok("stop", "--all")
    _assert_nothing_left(experiment_id, experiment_dir)

    view_port = free_port()
    cli.ok("view", experiment_id, "--port", str(view_port))
    assert _status(cli, experiment_id) == "VIEWED"
    assert len(httpx.get(f"http://127.0.0.1:{view_port}/api/v1/nni/trial-jobs", timeout=20).json()) == 8
    refused = cli.run("trial", "kill", experiment_id, "-T", victim)
    assert refused.returncode != 0 and "read-only" in refused.stderr
    cli.ok("stop", experiment_id)
    _assert_nothing_left(experiment_id, experiment_dir)
