"""Every bad config makes ``trialfleet create`` exit 2 with a message naming the file and the key, and start
nothing: no experiment directory, no manifest entry, no process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, write_experiment

# (name, edit of the good config text, what the message must name besides the file)
BAD_CONFIGS = [
    ("unknown_key", lambda text: text + "trialConcurency: 3\n", "trialConcurency"),
    (
        "wrong_type",
        lambda text: text.replace("trialConcurrency: 4", "trialConcurrency: many"),
        "trialConcurrency",
    ),
    (
        "missing_field",
        lambda text: "\n".join(line for line in text.splitlines() if "trialCommand" not in line),
        "trialCommand",
    ),
    (
        "missing_search_space_file",
        lambda text: text.replace("search_space.json", "nope.json"),
        "searchSpaceFile",
    ),
    ("malformed_yaml", lambda text: text + "tuner: [Random\n  bad: : yaml\n", "line"),
    (
        "no_code_directory",
        lambda text: text.replace("trialCodeDirectory: code", "trialCodeDirectory: nodir"),
        "trialCodeDirectory",
    ),
    ("unknown_tuner", lambda text: text.replace("name: Random", "name: NoSuchTuner"), "NoSuchTuner"),
    (
        "unavailable_platform",
        lambda text: text.replace(
            "platform: local",
            "platform: dlc\n  image: img\n  podCount: 1\n  ecsSpec: ecs.c6.large\n  region: cn-hangzhou\n"
            "  workspaceId: ws\n  nasDataSourceId: nas\n  accessKeyId: id\n  accessKeySecret: secret\n"
            "  localStorageMountPoint: /mnt/nas\n  containerStorageMountPoint: /mnt/nas",
        ),
        "'dlc' is not available",
    ),
]
#: refused after the file was read: the message names what is refused, not the file
_NOT_ABOUT_THE_FILE = {"unknown_tuner", "unavailable_platform"}


def _assert_started_nothing(cli: Cli, root: Path) -> None:
    assert not (root / "experiments").exists()
    assert cli.json("experiment", "list", "--all", "--json") == []
    assert processes_mentioning(str(root)) == []


@pytest.mark.parametrize(("name", "edit", "key"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_exits_2_and_starts_nothing(tmp_path: Path, name: str, edit: object, key: str) -> None:
    cli = Cli.in_dir(tmp_path)
    good = write_experiment(tmp_path, hold=False)
    bad = tmp_path / f"{name}.yml"
    assert callable(edit)
    bad.write_text(edit(good.read_text()))

    result = cli.run("create", "--config", str(bad), "--port", str(free_port()))

    assert result.returncode == 2, result.stderr
    if name not in _NOT_ABOUT_THE_FILE:
        assert str(bad) in result.stderr
    assert key in result.stderr
    assert "Traceback" not in result.stderr
    _assert_started_nothing(cli, tmp_path)


def test_busy_port_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = write_experiment(tmp_path, hold=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli.run("create", "--config", str(config), "--port", str(port))
    assert result.returncode == 2, result.stderr
    assert f"port {port}" in result.stderr and "Traceback" not in result.stderr
    _assert_started_nothing(cli, tmp_path)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    good = write_experiment(tmp_path, hold=False)
    bad = tmp_path / "bad.yml"
    bad.write_text(good.read_text() + "nope: 1\n")
    result = cli.run("create", "--config", str(bad), "--debug")
    assert result.returncode == 2 and "Traceback" in result.stderr
