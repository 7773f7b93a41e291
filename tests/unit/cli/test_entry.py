"""The console script (``trialfleet.cli.entry``) starts a launching command's standby manager before it imports
the command line itself; the rule it guesses by is ``standby_wanted``, on the arguments as typed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trialfleet.cli.main import main
from trialfleet.manager.standby import config_argument, standby_wanted


@pytest.mark.parametrize(
    "args",
    [
        ["create", "--config", "c.yml"],
        ["create", "--config=c.yml", "--port", "8081", "--debug"],
        ["resume", "abc", "--port", "8081"],
        ["view", "abc"],
        ["create", "--config", "c.yml", "--", "--foreground"],  # after "--": not an option
        ["create", "--fi", "x"],  # a prefix of neither --foreground nor --help
    ],
)
def test_launching_commands_want_a_standby(args: list[str]) -> None:
    assert standby_wanted(args)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["stop", "abc"],
        ["experiment", "list"],
        ["--version"],
        ["create", "--config", "c.yml", "--foreground"],
        ["create", "--config", "c.yml", "-f"],
        ["create", "--config", "c.yml", "--fore"],  # nnictl's prefixes: --foreground
        ["create", "--he"],
        ["resume", "abc", "-h"],
        ["view", "--help"],
    ],
)
def test_other_commands_and_foreground_runs_do_not(args: list[str]) -> None:
    assert not standby_wanted(args)


@pytest.mark.parametrize(
    ("args", "config"),
    [
        (["create", "--config", "c.yml"], "c.yml"),
        (["create", "--port", "8081", "--config=dir/c.yml"], "dir/c.yml"),
        (["create", "-c", "c.yml", "--debug"], "c.yml"),
        (["create", "-cc.yml"], "c.yml"),
        (["create", "--conf", "c.yml"], "c.yml"),  # nnictl's prefixes: --config
        (["create", "--port", "8081"], None),
        (["create", "--config"], None),
        (["create", "--", "--config", "c.yml"], None),  # after "--": not an option
        (["resume", "abc", "--port", "8081"], None),  # its config is the stored one
        (["view", "-c", "c.yml"], None),
    ],
)
def test_the_standby_of_a_create_is_told_its_config_file(args: list[str], config: str | None) -> None:
    assert config_argument(args) == config


def test_the_console_script_imports_only_the_standard_library_before_its_standby() -> None:
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import trialfleet.cli.entry\n"
        "from trialfleet.manager.standby import StandbyManager\n"
        "new = set(sys.modules) - before\n"
        "print(sorted({m.split('.')[0] for m in new} - set(sys.stdlib_module_names)))\n"
        "print(sorted(m for m in new if m.startswith(('typer', 'pydantic', 'trialfleet.cli.main'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["['trialfleet']", "[]"]


class _Standby:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_standby_started_for_a_command_that_turns_out_not_to_launch_is_closed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    standby = _Standby()
    assert main(["--version"], standby=standby) == 0  # type: ignore[arg-type]
    assert standby.closed
