"""``algo register/unregister/list/show``: the registered-algorithms file and name resolution."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
import yaml

from trialfleet.errors import AlgorithmError
from trialfleet.tuning import create_tuner
from trialfleet.tuning.user_algorithms import list_algorithms, register, registry_path, show, unregister

TUNER_SOURCE = """
    from trialfleet.tuning.base import Tuner

    class FixedTuner(Tuner):
        def __init__(self, value=1):
            self.value = value
        def update_search_space(self, search_space):
            pass
        def generate_parameters(self, parameter_id, **kwargs):
            return {"x": self.value}
        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIALFLEET_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture
def meta(tmp_path):
    code = tmp_path / "algo_code"
    code.mkdir()
    (code / "fixed_tuner_mod.py").write_text(textwrap.dedent(TUNER_SOURCE))
    path = tmp_path / "meta.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "algoType": "tuner",
                "builtinName": "FixedTuner",
                "className": "fixed_tuner_mod.FixedTuner",
                "classArgsValidator": "fixed_tuner_mod.Validator",
                "codeDirectory": "algo_code",
            }
        )
    )
    return path


def test_register_resolve_list_show_unregister(config_dir, meta):
    assert register(meta) == ["FixedTuner"]
    assert registry_path() == config_dir / "registered_algorithms.yml"
    stored = yaml.safe_load(registry_path().read_text())
    assert stored["tuners"][0]["builtinName"] == "FixedTuner" and stored["assessors"] == []

    algo = SimpleNamespace(name="fixedtuner", class_name=None, code_directory=None, class_args={"value": 7})
    assert create_tuner(algo, {}).generate_parameters(0) == {"x": 7}

    rows = {(row.name, row.source) for row in list_algorithms()}
    assert ("FixedTuner", "user") in rows and ("TPE", "builtin") in rows and ("Medianstop", "builtin") in rows
    assert show("FixedTuner")["className"] == "fixed_tuner_mod.FixedTuner"
    assert show("tpe")["classArgs"] == {"optimize_mode": "minimize", "seed": None, "tpe_args": None}

    with pytest.raises(AlgorithmError, match="already registered"):
        register(meta)
    unregister("FIXEDTUNER")
    with pytest.raises(AlgorithmError, match="unknown tuner 'fixedtuner'"):
        create_tuner(algo, {})
    with pytest.raises(AlgorithmError, match="no registered algorithm named 'FixedTuner'"):
        unregister("FixedTuner")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"algoType": "tuner", "builtinName": "tpe", "className": "m.T"},
            "built-in algorithm and cannot be overwritten",
        ),
        (
            {"algoType": "advisor", "builtinName": "A", "className": "m.T"},
            "algoType must be 'tuner' or 'assessor'",
        ),
        (
            {"algoType": "tuner", "builtinName": "A", "className": "T"},
            "className must look like 'module.Class'",
        ),
        (
            {"algoType": "tuner", "builtinName": "A", "className": "no_such_module_xyz.T"},
            "cannot import tuner class",
        ),
    ],
)
def test_register_refusals(config_dir, tmp_path, entry, expected):
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump({"algorithms": [entry]}))
    with pytest.raises(AlgorithmError, match=expected):
        register(path)
    assert not registry_path().exists()


def test_builtins_cannot_be_unregistered(config_dir):
    with pytest.raises(AlgorithmError, match="built-in algorithm and cannot be unregistered"):
        unregister("GridSearch")
