"""A trial's command runs under ``bash -c`` unless bash would only split it into words and exec its program;
then the keeper execs those words itself, and the trial sees what it would have seen under bash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trialfleet.training_services.trial_command import BASH, trial_argv

DUMP = """#!{python}
import json, os, sys
print(json.dumps({{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}}))
"""


@pytest.fixture
def code(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "dump.py").write_text(DUMP.format(python=sys.executable))
    (code / "dump.py").chmod(0o755)
    (code / "no_shebang.sh").write_text("echo from bash\n")
    (code / "no_shebang.sh").chmod(0o755)
    (code / "not_executable.py").write_text(DUMP.format(python=sys.executable))
    return code


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/root", **extra}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize(
    "command",
    [
        "python3 dump.py --lr 0.01",
        "./dump.py --lr=0.1 a,b",
        "  python3   dump.py\tx  ",
        f"{sys.executable} dump.py",
        "LR=0.1 python3 dump.py",
        "A= B=x=y:z LR=1 LR=2 ./dump.py --lr 1",
        "HOME=/tmp python3 dump.py",  # HOME would matter to a tilde, and there is none
    ],
)
@pytest.mark.slow
def test_a_plain_command_is_execed_and_sees_what_bash_would_give_it(code: Path, command: str) -> None:
    for inherited in (_env(SHLVL="2", PWD="/"), _env()):
        env = dict(inherited)
        argv = trial_argv(command, str(code), env)
        assert argv[0] != BASH, argv
        direct = _run(argv, code, env)
        under_bash = _run([BASH, "-c", command], code, dict(inherited))
        assert direct["argv"] == under_bash["argv"] and direct["cwd"] == under_bash["cwd"]
        assert direct["env"] == under_bash["env"], (direct["env"], under_bash["env"])


@pytest.mark.parametrize(
    "command",
    [
        "python3 dump.py > out.txt",
        "python3 dump.py | cat",
        "python3 dump.py; true",
        "python3 dump.py && true",
        "python3 dump.py &",
        "python3 dump.py $HOME",
        "python3 dump.py `true`",
        "python3 dump.py 'a b'",
        'python3 dump.py "a b"',
        "python3 dump.py a\\ b",
        "python3 dump.py *.py",
        "python3 dump.py ?",
        "python3 dump.py [ab]",
        "python3 dump.py ~/x",
        "python3 dump.py {a,b}",
        "python3 dump.py # comment",
        "(python3 dump.py)",
        "python3 dump.py\npython3 dump.py",
        "LR=0.1",
        "LR=0.1 cd .",
        "LR=0.1 time python3 dump.py",
        "LR=0.1 no-such-program",
        "PATH=/usr/bin python3 dump.py",
        "SHLVL=5 python3 dump.py",
        "BASH_ARGV0=x python3 dump.py",
        "POSIXLY_CORRECT=1 python3 dump.py",
        "1A=0 python3 dump.py",
        "cd . && python3 dump.py",
        "exec python3 dump.py",
        "source env.sh",
        "echo hi",
        "time python3 dump.py",
        "no-such-program dump.py",
        "./no_shebang.sh",
        "./not_executable.py",
        "./missing.py",
        "",
        "   ",
    ],
)
def test_anything_bash_would_interpret_or_fail_on_runs_under_bash(code: Path, command: str) -> None:
    env = _env()
    assert trial_argv(command, str(code), env) == [BASH, "-c", command]
    assert env == _env()  # nothing added


def test_bash_env_or_a_relative_path_entry_leaves_it_to_bash(code: Path) -> None:
    for env in (_env(BASH_ENV="/etc/profile"), _env(PATH=f".:{os.defpath}"), _env(PATH="")):
        assert trial_argv("python3 dump.py", str(code), dict(env))[0] == BASH


def test_the_program_is_found_on_the_trials_path_not_this_processs(code: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(code / "dump.py", bin_dir / "only-here")
    env = _env(PATH=f"{bin_dir}:/usr/bin:/bin")
    assert trial_argv("only-here x", str(code), env) == ["only-here", "x"]
    assert env["_"] == str(bin_dir / "only-here")
