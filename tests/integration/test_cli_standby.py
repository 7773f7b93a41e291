"""``trialfleet create`` starts the manager's process before it reads the config (``manager/standby.py``): the
process it hands the experiment to must be the manager ``spawn_manager`` would have started, and a standby that
gets no experiment must leave nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until, write_experiment
from trialfleet.manager.standby import StandbyManager


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def test_the_manager_created_through_a_standby_is_the_one_spawn_manager_would_start(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    created = cli.ok("create", "--config", str(write_experiment(tmp_path, hold=False)), "--port", str(port))
    experiment_id = re.search(r"Experiment ID: (\w+)", created).group(1)  # type: ignore[union-attr]
    experiment_dir = tmp_path / "experiments" / experiment_id
    pid = int(cli.json("experiment", "list", "--json")[0]["pid"])
    try:
        # `ps` shows what it runs, as for a manager started directly
        assert _cmdline(pid).startswith(
            f"{sys.executable} -m trialfleet.manager --experiment-dir {experiment_dir} --action create "
            f"--port {port} --host 127.0.0.1 --socket-fd "
        )
        assert os.getsid(pid) == pid  # detached: its own session, as spawn_manager starts it
        assert os.readlink(f"/proc/{pid}/fd/1") == str(experiment_dir / "log" / "nnictl_stdout.log")
        assert os.readlink(f"/proc/{pid}/fd/2") == str(experiment_dir / "log" / "nnictl_stderr.log")
        assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)
        wait_until(lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE")
    finally:
        cli.run("stop", experiment_id)
    assert processes_mentioning(str(experiment_dir)) == []


def test_resume_and_view_hand_their_experiment_to_a_standby_too(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    created = cli.ok(
        "create", "--config", str(write_experiment(tmp_path, hold=False)), "--port", str(free_port())
    )
    experiment_id = re.search(r"Experiment ID: (\w+)", created).group(1)  # type: ignore[union-attr]
    experiment_dir = tmp_path / "experiments" / experiment_id
    wait_until(lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE")
    cli.ok("stop", experiment_id)
    for action in ("resume", "view"):
        port = free_port()
        cli.ok(action, experiment_id, "--port", str(port))
        pid = int(cli.json("experiment", "list", "--json")[0]["pid"])
        assert _cmdline(pid).startswith(
            f"{sys.executable} -m trialfleet.manager --experiment-dir {experiment_dir} --action {action} "
            f"--port {port} --host 127.0.0.1"
        )
        assert "--socket-fd" not in _cmdline(pid)  # it binds the port itself, as before
        assert os.readlink(f"/proc/{pid}/fd/2") == str(experiment_dir / "log" / "nnictl_stderr.log")
        cli.ok("stop", experiment_id)
    assert processes_mentioning(str(experiment_dir)) == []


def test_a_refused_config_leaves_no_standby_behind(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    config.write_text(config.read_text().replace("trialConcurrency: 4", "trialConcurrency: -1"))
    refused = cli.run("create", "--config", str(config), "--port", str(free_port()))
    assert refused.returncode == 2 and "trialConcurrency" in refused.stderr
    assert _standbys(tmp_path) == set()
    assert not (tmp_path / "experiments").exists()


def test_a_standby_told_the_config_imports_its_platform_while_it_waits(tmp_path: Path) -> None:
    # asyncssh's import loads cryptography's native library: seen in the process's memory map, before any order
    config = tmp_path / "config.yml"
    config.write_text("trainingService:\n  platform: remote\n  machineList: [{host: h}]\n")
    with StandbyManager.start(str(config)) as standby:
        maps = Path(f"/proc/{standby.proc.pid}/maps")
        wait_until(lambda: "cryptography" in maps.read_text(), "asyncssh imported by the standby")
        assert not standby.handed and standby.proc.poll() is None
    assert not _alive(standby.proc.pid)


def test_a_standby_whose_caller_dies_exits_by_itself() -> None:
    # the caller is killed before it can hand anything over or kill the standby: the standby sees its end of
    # the socket pair close, and exits without having opened anything
    script = (
        "import os, sys; from trialfleet.manager.standby import StandbyManager; "
        "s = StandbyManager.start(); print(s.proc.pid, flush=True); os._exit(0)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    pid = int(done.stdout)
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_a_standby_that_is_gone_is_not_handed_the_experiment() -> None:
    with StandbyManager.start() as standby:
        standby.proc.kill()
        standby.proc.wait()
        assert standby.hand(["--experiment-dir", "/nonexistent"], None) is False  # spawn_manager starts one
    assert not standby.handed


def test_closing_an_unused_standby_kills_it() -> None:
    standby = StandbyManager.start()
    standby.close()
    assert standby.proc.returncode is not None and not _alive(standby.proc.pid)


def _standbys(root: Path) -> set[int]:
    """The standby managers started from ``root``: it is their working directory (and their TRIALFLEET_HOME is
    under it). Another test's or another run's standbys on the machine are not counted."""
    return {
        pid
        for pid, cmdline in processes_mentioning(str(root))
        if "--orders-fd" in cmdline and "trialfleet.manager" in cmdline
    }


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
