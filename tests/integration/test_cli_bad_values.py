"""Bad values through the console script: a port or host the manager cannot listen on is refused by name
before anything is created, and updates past a config bound are refused by key and change nothing."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, write_experiment


def _nothing_created(tmp_path: Path, cli: Cli) -> None:
    assert not (tmp_path / "experiments").exists(), list((tmp_path / "experiments").iterdir())
    manifest = Path(cli.env["TRIALFLEET_HOME"]) / "experiments.json"
    assert not manifest.exists() or json.loads(manifest.read_text()) == {}


def _not_an_address_of_this_machine() -> str:
    """An address of TEST-NET-1 (RFC 5737), which no interface of a test machine holds."""
    address = "192.0.2.1"
    with socket.socket() as probe, pytest.raises(OSError):
        probe.bind((address, 0))
    return address


@pytest.mark.parametrize("foreground", [False, True], ids=["detached", "foreground"])
def test_bad_ports_and_hosts_are_refused_before_anything_is_created(tmp_path: Path, foreground: bool) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    extra = ["--foreground"] if foreground else []
    foreign = _not_an_address_of_this_machine()
    refusals = [
        (
            ["--port", "70000"],
            "Invalid value for '--port' / '-p': 70000 is not a TCP port: expected 1 to 65535",
        ),
        (["--port", "-1"], "Invalid value for '--port' / '-p': -1 is not a TCP port: expected 1 to 65535"),
        (["-p", "0"], "Invalid value for '--port' / '-p': 0 is not a TCP port: expected 1 to 65535"),
        (
            ["--port", str(free_port()), "--host", "no-such-host.invalid"],
            "cannot listen on 'no-such-host.invalid': the host name does not resolve (",
        ),
        (
            ["--port", str(free_port()), "--host", foreign],
            f"cannot listen on '{foreign}': {foreign} is not an address of this machine (",
        ),
    ]
    try:
        for args, message in refusals:
            result = cli.run("create", "-c", str(config), *args, *extra)
            assert result.returncode == 2, (args, result.stdout, result.stderr)
            assert message in " ".join(result.stderr.split()), (args, result.stderr)
            assert "Traceback" not in result.stderr
            _nothing_created(tmp_path, cli)
    finally:
        cli.run("stop", "--all")
    assert processes_mentioning(str(tmp_path)) == []


def test_the_port_of_resume_view_and_stop_is_checked_by_the_option(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    for args in (["resume", "abcdefgh"], ["view", "abcdefgh"], ["stop"]):
        result = cli.run(*args, "--port", "65536")
        assert result.returncode == 2
        assert "65536 is not a TCP port: expected 1 to 65535" in " ".join(result.stderr.split())


def test_updates_past_a_bound_are_refused_by_key_and_change_nothing(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=True)
    out = cli.ok("create", "-c", str(config), "-p", str(free_port()))
    match = re.search(r"Experiment ID: (\w+)", out)
    assert match
    try:
        before = cli.json("config", "show")
        for args, message in [
            (
                ["concurrency", "-v", str(2**70)],
                f"trialConcurrency: expected a number at most 10000, got {2**70}",
            ),
            (["trialnum", "-v", str(2**63)], "maxTrialNumber: expected a number at most 1000000"),
            (
                ["duration", "-v", "3651d"],
                "maxExperimentDuration: expected a duration of at most 3650d (ten years)",
            ),
        ]:
            result = cli.run("update", *args)
            assert result.returncode != 0, (args, result.stdout)
            assert message in " ".join(result.stderr.split()), (args, result.stderr)
        assert cli.json("config", "show") == before
        cli.ok("update", "concurrency", "-v", "3")  # a value within the bound still goes through
        assert cli.json("config", "show")["trialConcurrency"] == 3
    finally:
        (tmp_path / "code" / "hold").unlink()
        cli.ok("stop", "--all")
    assert processes_mentioning(str(tmp_path)) == []
