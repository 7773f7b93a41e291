"""``--help`` shows a flag as typed (``--version -v``), with no ``<bool>`` value typer's panel would give it,
while options that take a value keep their type."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.cli.main import build_command, main


def _command_paths(command: Any, path: list[str]) -> list[list[str]]:
    subs = getattr(command, "commands", {})
    return [path] + [p for name, sub in subs.items() for p in _command_paths(sub, [*path, name])]


@pytest.mark.parametrize("path", _command_paths(build_command(), []), ids=lambda p: " ".join(p) or "root")
def test_help_shows_no_type_on_flags(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--help" in out
    assert "<bool>" not in out


def test_value_options_keep_their_type(capsys: pytest.CaptureFixture[str]) -> None:
    main(["create", "--help"])
    out = capsys.readouterr().out
    assert "<path>" in out and "<int>" in out
