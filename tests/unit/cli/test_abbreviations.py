"""nnictl's argparse habit: every long option of every command may be given as any unambiguous prefix."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from trialfleet.cli.abbreviations import expand_abbreviations
from trialfleet.cli.main import app, main

ROOT = typer.main.get_command(app)


def commands(command: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))
    if not hasattr(command, "commands"):
        yield path, command


CASES = [
    (path, opt, others)
    for path, command in commands()
    for opt, others in [
        (o, [x for p in command.params for x in p.opts + p.secondary_opts if x.startswith("--") and x != o])
        for p in command.params
        for o in p.opts + p.secondary_opts
        if o.startswith("--")
    ]
]


def test_every_command_is_covered() -> None:
    paths = {path for path, _ in commands()}
    assert ("create",) in paths and ("algo", "register") in paths and ("trial", "kill") in paths
    assert len(CASES) > 40


@pytest.mark.parametrize(
    ("path", "option", "others"), CASES, ids=[" ".join(c[0]) + " " + c[1] for c in CASES]
)
def test_the_shortest_unambiguous_prefix_is_expanded(
    path: tuple[str, ...], option: str, others: list[str]
) -> None:
    for length in range(3, len(option) + 1):
        prefix = option[:length]
        if not any(other.startswith(prefix) for other in others):
            break
    else:
        return  # a name that is the prefix of another (--all and --all-x): only the full name is unambiguous
    assert expand_abbreviations(ROOT, [*path, prefix]) == [*path, option]
    assert expand_abbreviations(ROOT, [*path, f"{prefix}=v"]) == [*path, f"{option}=v"]


def test_ambiguous_unknown_and_positional_are_left_to_click(capsys: pytest.CaptureFixture[str]) -> None:
    assert expand_abbreviations(ROOT, ["create", "--nope"]) == ["create", "--nope"]
    assert expand_abbreviations(ROOT, ["trial", "ls", "--", "--json"]) == ["trial", "ls", "--", "--json"]
    assert main(["create", "--nope"]) == 2
    assert "No such option: --nope" in capsys.readouterr().err


@pytest.mark.slow
def test_nnictl_examples(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From NNI's docs: ``nnictl algo register --meta <file>``."""
    monkeypatch.setenv("TRIALFLEET_CONFIG_DIR", str(tmp_path / "cfg"))
    (tmp_path / "my_tuner.py").write_text("from nni.tuner import Tuner\nclass MyTuner(Tuner):\n    pass\n")
    meta = tmp_path / "meta.yml"
    meta.write_text("algoType: tuner\nbuiltinName: MyTuner\nclassName: my_tuner.MyTuner\nclassArgs: {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["algo", "register", "--meta", str(meta)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["algo", "list", "--js"]) == 0 and "MyTuner" in capsys.readouterr().out
