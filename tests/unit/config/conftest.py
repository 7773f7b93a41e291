"""Fixtures: the realistic example configs in data/, and a writer for configs made up by a test."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding a code directory and a search space file, as a user's project would."""
    (tmp_path / "code").mkdir()
    shutil.copy(DATA / "search_space.json", tmp_path / "search_space.json")
    return tmp_path


@pytest.fixture
def write_config(workdir: Path) -> Callable[[str], Path]:
    """Write YAML text (dedented) to ``<workdir>/config.yml`` and return the path."""

    def write(text: str, name: str = "config.yml") -> Path:
        path = workdir / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


MINIMAL = """\
searchSpaceFile: search_space.json
trialCommand: python3 trial.py
trialCodeDirectory: code
trialConcurrency: 1
tuner:
  name: TPE
trainingService:
  platform: local
"""
