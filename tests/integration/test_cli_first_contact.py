"""What a new user meets first, through the real console script: a finished experiment says DONE with its
end time, one manager per experiment (a racing resume is refused; a killed one is not counted as running,
zombie or not), and a kill of a finished trial says so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.integration.cli_harness import Cli, free_port, wait_until, write_experiment
from trialfleet.storage.manager_lock import manager_running


def _create(cli: Cli, config: Path, *extra: str) -> str:
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()), *extra)
    return re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]


def test_a_finished_foreground_run_is_done_with_its_end_time(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    experiment_id = _create(cli, write_experiment(tmp_path, hold=False), "--foreground")
    (entry,) = cli.json("experiment", "list", "--all", "--json")
    assert (entry["id"], entry["status"]) == (experiment_id, "DONE")
    assert entry["endTime"] is not None and entry["endTime"] >= entry["startTime"]
    trial = cli.json("trial", "ls", experiment_id, "--json")[0]["trialJobId"]
    resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))  # a finished one may go on
    assert "Resumed" in resumed
    refused = cli.run("trial", "kill", experiment_id, "-T", trial)
    assert refused.returncode == 2 and f"trial {trial} has already ended (SUCCEEDED)" in refused.stderr
    cli.ok("stop", experiment_id)


def test_one_manager_per_experiment_and_a_killed_one_is_not_running(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    experiment_id = _create(cli, write_experiment(tmp_path, hold=True))
    experiment_dir = tmp_path / "experiments" / experiment_id
    cli.ok("stop", experiment_id)
    # a manager started by this process: killed, it stays a zombie until this process reaps it
    argv = [sys.executable, "-m", "trialfleet.manager", "--experiment-dir", str(experiment_dir)]
    first = subprocess.Popen([*argv, "--action", "resume", "--port", str(free_port())], env=cli.env)
    wait_until(lambda: manager_running(experiment_dir), "the first manager to hold the experiment")
    second = subprocess.run(
        [*argv, "--action", "resume", "--port", str(free_port())], env=cli.env, capture_output=True, text=True
    )
    assert second.returncode == 2 and f"another manager (pid {first.pid})" in second.stderr
    os.kill(first.pid, signal.SIGKILL)
    wait_until(
        lambda: Path(f"/proc/{first.pid}/stat").read_text().split(")")[-1].split()[0] == "Z", "a zombie"
    )
    # the lock goes with the last of its threads, which may still be exiting when the leader shows Z
    wait_until(lambda: not manager_running(experiment_dir), "the killed manager's lock to be released")
    assert Path(f"/proc/{first.pid}/stat").read_text().split(")")[-1].split()[0] == "Z"  # not reaped yet
    assert cli.json("experiment", "list", "--all", "--json")[0]["status"] == "STOPPED"
    cli.ok("resume", experiment_id, "--port", str(free_port()))  # at once, the zombie notwithstanding
    first.wait()
    (tmp_path / "code" / "hold").unlink()
    cli.ok("stop", experiment_id)


def test_a_foreground_run_whose_every_trial_failed_exits_3(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    (tmp_path / "code" / "trial.py").write_text("import sys\nsys.exit('no luck')\n")
    done = cli.run("create", "--config", str(config), "--port", str(free_port()), "--foreground", timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "every trial failed: exit code 3" in done.stdout
    box = [line for line in done.stdout.splitlines() if line[:1] in "╭│╰"]  # the progress panel, piped
    assert box and len(box[0]) < 200 and len({len(line) for line in box}) == 1, done.stdout
    assert any(line.endswith(" │") and line[-3] != " " for line in box), "as wide as its widest line"
    (entry,) = cli.json("experiment", "list", "--all", "--json")
    assert entry["status"] == "DONE"  # the experiment itself ran to its end
    port = free_port()
    cli.ok("view", entry["id"], "--port", str(port))
    rest = httpx.get(f"http://127.0.0.1:{port}/api/v1/nni/check-status", timeout=20).json()["status"]
    assert rest == "VIEWED" and cli.json("experiment", "list", "--all", "--json")[0]["status"] == rest
    cli.ok("stop", entry["id"])
    assert cli.json("experiment", "list", "--all", "--json")[0]["status"] == "DONE"
