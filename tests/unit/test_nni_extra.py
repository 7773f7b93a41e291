"""``pip install 'trialfleet[nni]'`` brings what ``pip install nni`` brought an NNI user: the library of every
built-in tuner and assessor, and an ``nnictl`` console script."""

from __future__ import annotations

import importlib
import re
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from trialfleet.tuning.catalog import BUILTIN_ASSESSORS, BUILTIN_TUNERS

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def _name(requirement: str) -> tuple[str, set[str]]:
    match = re.match(r"([A-Za-z0-9_.\-]+)(?:\[([^\]]*)\])?", requirement)
    assert match is not None, requirement
    extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return match.group(1).lower().replace("_", "-"), extras


def distributions(extra: str | None) -> set[str]:
    """What installing trialfleet with ``extra`` installs directly (its own extras followed)."""
    project = PYPROJECT["project"]
    wanted = list(project["dependencies"] if extra is None else project["optional-dependencies"][extra])
    found: set[str] = set()
    while wanted:
        name, extras = _name(wanted.pop())
        if name == "trialfleet":
            wanted += [r for e in extras for r in project["optional-dependencies"][e]]
        else:
            found.add(name)
    return found | (distributions(None) if extra is not None else set())


@pytest.mark.slow
def test_every_builtin_algorithms_library_comes_with_the_nni_extra() -> None:
    installed = distributions("nni")
    providers = metadata.packages_distributions()
    needed = {module for algorithm in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS) for module in algorithm.requires}
    assert needed >= {"sklearn", "scipy", "smac", "optuna"}
    for module in needed:
        owners = {name.lower().replace("_", "-") for name in providers[module]}
        assert owners & installed, f"{module} ({owners}) is not installed by trialfleet[nni]"
    assert "torch" not in installed  # GP and Metis run on scikit-learn


def test_nnictl_is_a_console_script() -> None:
    target = PYPROJECT["project"]["scripts"]["nnictl"]
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))
