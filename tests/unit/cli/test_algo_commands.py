"""``algo register|list|show|unregister`` against a real registry file and a real custom tuner module.

Run as subprocesses: registering imports the custom tuner, which puts the ``nni`` shim into the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TUNER = """
from nni.tuner import Tuner

class MyTuner(Tuner):
    def update_search_space(self, search_space):
        self.space = search_space

    def generate_parameters(self, parameter_id, **kwargs):
        return {"x": 0.5}

    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        pass
"""


@pytest.fixture
def meta_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRIALFLEET_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    (tmp_path / "algos").mkdir()
    (tmp_path / "algos" / "my_tuner.py").write_text(textwrap.dedent(TUNER))
    meta = tmp_path / "meta.yml"
    meta.write_text(
        "algoType: tuner\nbuiltinName: MyTuner\nclassName: my_tuner.MyTuner\ncodeDirectory: algos\n"
    )
    return meta


def algo(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trialfleet.cli.main", "algo", *args]
    return subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=60)


@pytest.mark.slow
def test_register_list_show_unregister(meta_file: Path) -> None:
    registered = algo("register", "--meta_path", str(meta_file))
    assert registered.returncode == 0 and "Registered MyTuner." in registered.stdout

    listed = algo("list", "--json")
    assert listed.returncode == 0
    rows = json.loads(listed.stdout)
    assert {
        "name": "MyTuner",
        "kind": "tuner",
        "source": "user",
        "class_name": "MyTuner",
        "module": "my_tuner",
    } in rows
    assert any(r["name"] == "TPE" and r["source"] == "builtin" for r in rows)

    shown = algo("show", "mytuner")  # names match case-insensitively, as in NNI
    assert shown.returncode == 0
    assert json.loads(shown.stdout)["className"] == "my_tuner.MyTuner"
    assert json.loads(shown.stdout)["source"] == "user"

    again = algo("register", "-m", str(meta_file))
    assert again.returncode == 2 and "already registered" in again.stderr

    assert algo("unregister", "MyTuner").returncode == 0
    gone = algo("show", "MyTuner")
    assert gone.returncode == 2 and "no algorithm named 'MyTuner'" in gone.stderr


@pytest.mark.slow
def test_builtins_cannot_be_unregistered(meta_file: Path) -> None:
    refused = algo("unregister", "TPE")
    assert refused.returncode == 2
    assert "built-in" in refused.stderr and "Traceback" not in refused.stderr
