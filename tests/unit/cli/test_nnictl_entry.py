"""``nnictl``'s parser against NNI 3.0's own (the real one, in NNI's virtualenv), and the hand-over to NNI's nnictl
where NNI is installed."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trialfleet.cli.nnictl.parser import build_parser

ROOT = Path(__file__).resolve().parents[3]

#: the parser's whole surface: per command, each argument's flags, dest, default, required, nargs, choices, type
SURFACE = """
import argparse, json

def walk(parser, prefix, out):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, prefix + [name], out)
        elif not isinstance(action, argparse._HelpAction):
            out.setdefault(" ".join(prefix), []).append([
                action.option_strings, action.dest, repr(action.default), action.required,
                repr(action.nargs), action.choices and list(action.choices),
                getattr(action.type, "__name__", None), type(action).__name__,
            ])
    return out
"""


def surface(parser: argparse.ArgumentParser) -> dict[str, Any]:
    scope: dict[str, Any] = {}
    exec(SURFACE, scope)
    return json.loads(json.dumps(scope["walk"](parser, [], {})))


def real_nni_python() -> str:
    python = os.environ.get("TRIALFLEET_REAL_NNI_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("NNI 3.0's virtualenv is not built (scripts/test builds it; TRIALFLEET_REAL_NNI_PYTHON)")
    return python


@pytest.mark.slow
def test_every_command_and_option_is_nnictls() -> None:
    script = SURFACE + (
        "from nni.tools.nnictl.nnictl import get_parser\nprint(json.dumps(walk(get_parser(), [], {})))"
    )
    run = subprocess.run([real_nni_python(), "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    nni = json.loads(run.stdout.splitlines()[-1])
    ours = surface(build_parser())
    assert sorted(ours) == sorted(nni)
    for command, arguments in nni.items():
        assert ours[command] == arguments, command


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["create", "--conf", "c.yml", "-p8088"], {"config": "c.yml", "port": 8088, "command": "create"}),
        (["trial", "ls", "--hea", "3"], {"head": 3, "command": "trial ls"}),
        (["experiment", "export", "x", "--ty", "csv", "--file", "o.csv", "--inter"], {"path": "o.csv"}),
        (["update", "concurrency", "--val", "4"], {"value": "4", "id": None}),
        (["algo", "reg", "--meta", "m.yml"], {"meta_path": "m.yml", "command": "algo register"}),
        (["resume", "abc", "--exp", "/w"], {"experiment_dir": "/w", "port": 8080}),
    ],
)
def test_abbreviations_and_defaults_are_argparses(argv: list[str], expected: dict[str, Any]) -> None:
    parsed = vars(build_parser().parse_args(argv))
    assert {key: parsed[key] for key in expected} == expected


def _entry(python: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from trialfleet.cli.nnictl.entry import main; sys.exit(main())"
    environ = {k: v for k, v in os.environ.items() if k != "TRIALFLEET_NNICTL"}
    environ.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, env=environ, timeout=120
    )


@pytest.mark.slow
def test_with_nni_installed_nnictl_is_nnis_and_says_so() -> None:
    """Run in NNI's own virtualenv: both would own bin/nnictl, so whichever file is there, NNI's users keep
    NNI's nnictl (its --version prints NNI's version) and are told how to reach trialfleet's."""
    run = _entry(real_nni_python(), "--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "3.0"
    assert "NNI 3.0 is installed in this environment, so this is NNI's own nnictl" in run.stderr
    assert "trialfleet's is 'python -m trialfleet.cli.nnictl ...'" in run.stderr


@pytest.mark.slow
def test_without_nni_nnictl_is_trialfleets() -> None:
    from trialfleet import __version__

    run = _entry(sys.executable, "--version")
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, __version__, "")
    run = _entry(sys.executable, "trial")
    assert run.stdout == 'Please run "nnictl {positional argument} --help" to see nnictl guidance.\n'
    run = _entry(sys.executable, "create")
    assert run.returncode == 2 and "the following arguments are required: --config/-c" in run.stderr
