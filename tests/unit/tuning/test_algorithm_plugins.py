"""Algorithms offered by installed packages (entry-point groups ``trialfleet.tuners`` / ``trialfleet.assessors``),
and the old module names of the built-ins, which still import after the split into tuners/, assessors/ and
search_space/."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_user_algorithms import TUNER_SOURCE

from trialfleet.errors import AlgorithmError
from trialfleet.tuning import create_assessor, create_tuner
from trialfleet.tuning.moved import MOVED
from trialfleet.tuning.user_algorithms import list_algorithms, show


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution on sys.path (its module and its dist-info with entry points), as pip installs one."""
    (tmp_path / "constant_algos.py").write_text(textwrap.dedent(TUNER_SOURCE))
    info = tmp_path / "constant_algos-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: constant-algos\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[trialfleet.tuners]\nConstant = constant_algos:FixedTuner\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRIALFLEET_CONFIG_DIR", str(tmp_path / "config"))  # nothing registered
    yield
    sys.modules.pop("constant_algos", None)


def test_an_installed_tuner_is_built_by_its_name(installed: None) -> None:
    tuner = create_tuner(SimpleNamespace(name="constant", class_args={"value": 7}), {})
    assert type(tuner).__name__ == "FixedTuner" and tuner.generate_parameters(0) == {"x": 7}


def test_an_installed_tuner_is_listed_and_shown_with_its_package(installed: None) -> None:
    rows = [row for row in list_algorithms() if row.name == "Constant"]
    assert [(r.kind, r.source, r.module, r.class_name) for r in rows] == [
        ("tuner", "constant-algos 0.3", "constant_algos", "FixedTuner")
    ]
    assert show("Constant")["className"] == "constant_algos.FixedTuner"


def test_a_tuner_name_is_not_an_assessor(installed: None) -> None:
    with pytest.raises(AlgorithmError, match="unknown assessor 'Constant'"):
        create_assessor(SimpleNamespace(name="Constant", class_args={}))


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_module_names_import_the_moved_modules(old: str) -> None:
    moved = importlib.import_module(f"trialfleet.tuning.{MOVED[old]}")
    assert importlib.import_module(f"trialfleet.tuning.{old}") is moved


def test_a_config_class_name_by_an_old_module_name_still_loads() -> None:
    assessor = create_assessor(
        SimpleNamespace(class_name="trialfleet.tuning.medianstop.MedianstopAssessor", class_args={})
    )
    assert type(assessor).__module__ == "trialfleet.tuning.assessors.medianstop"
    from trialfleet.tuning.search_space import contains  # the module is a package that exports the same

    assert contains({"x": {"_type": "choice", "_value": [1]}}, {"x": 1})
