"""``algo register|list|show|unregister`` against a real registry file and a real custom tuner module."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from trialfleet.cli.main import main

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
    (tmp_path / "algos").mkdir()
    (tmp_path / "algos" / "my_tuner.py").write_text(textwrap.dedent(TUNER))
    meta = tmp_path / "meta.yml"
    meta.write_text(
        "algoType: tuner\nbuiltinName: MyTuner\nclassName: my_tuner.MyTuner\ncodeDirectory: algos\n"
    )
    return meta


def test_register_list_show_unregister(meta_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["algo", "register", "--meta_path", str(meta_file)]) == 0
    assert "Registered MyTuner." in capsys.readouterr().out

    assert main(["algo", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {
        "name": "MyTuner",
        "kind": "tuner",
        "source": "user",
        "class_name": "MyTuner",
        "module": "my_tuner",
    } in rows
    assert any(r["name"] == "TPE" and r["source"] == "builtin" for r in rows)

    assert main(["algo", "show", "mytuner"]) == 0  # names match case-insensitively, as in NNI
    shown = json.loads(capsys.readouterr().out)
    assert shown["className"] == "my_tuner.MyTuner" and shown["source"] == "user"

    assert main(["algo", "register", "-m", str(meta_file)]) == 2
    assert "already registered" in capsys.readouterr().err

    assert main(["algo", "unregister", "MyTuner"]) == 0
    capsys.readouterr()
    assert main(["algo", "show", "MyTuner"]) == 2
    assert "no algorithm named 'MyTuner'" in capsys.readouterr().err


def test_builtins_cannot_be_unregistered(meta_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["algo", "unregister", "TPE"]) == 2
    err = capsys.readouterr().err
    assert "built-in" in err and "Traceback" not in err
