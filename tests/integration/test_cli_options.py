"""Launch options through the console script: ``--url_prefix`` and ``view --experiment_dir``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until, write_experiment


def test_url_prefix(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    port = free_port()
    out = cli.ok("create", "-c", str(config), "-p", str(port), "--url_prefix", "/team/")
    assert f"http://127.0.0.1:{port}/team/api/v1/nni" in out
    assert httpx.get(f"http://127.0.0.1:{port}/team/api/v1/nni/check-status", timeout=20).status_code == 200
    assert httpx.get(f"http://127.0.0.1:{port}/api/v1/nni/check-status", timeout=20).status_code == 404
    wait_until(lambda: cli.json("experiment", "status")["status"] == "DONE", "the experiment to finish")
    assert len(cli.json("trial", "ls", "--json")) == 6  # the CLI finds the prefix in the manifest
    cli.ok("stop", "--all")
    # resumed without a prefix (resume has no --url_prefix): the CLI must not look for the old one
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    port = free_port()
    cli.ok("resume", experiment_id, "-p", str(port))
    assert httpx.get(f"http://127.0.0.1:{port}/api/v1/nni/check-status", timeout=20).status_code == 200
    assert cli.json("experiment", "status")["status"] == "DONE"
    cli.ok("stop", "--all")


def test_view_an_experiment_moved_from_another_machine(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    out = cli.ok("create", "-c", str(config), "-p", str(free_port()))
    match = re.search(r"Experiment ID: (\w+)", out)
    assert match
    experiment_id = match.group(1)
    wait_until(lambda: cli.json("experiment", "status")["status"] == "DONE", "the experiment to finish")
    cli.ok("stop", experiment_id)

    elsewhere = Cli.in_dir(tmp_path / "elsewhere")  # an empty manifest: this machine never saw the experiment
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "experiments", moved)
    assert elsewhere.run("view", experiment_id, "-p", str(free_port())).returncode == 2
    elsewhere.ok("view", experiment_id, "-p", str(free_port()), "--experiment_dir", str(moved))
    assert elsewhere.json("experiment", "status", experiment_id)["status"] == "VIEWED"
    assert len(elsewhere.json("trial", "ls", experiment_id, "--json")) == 6
    elsewhere.ok("stop", experiment_id)
    assert processes_mentioning(str(moved)) == []
