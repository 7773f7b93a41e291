"""What the manager stores and serves is bounded: a search space past the limit is refused, naming the limit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.config.conftest import MINIMAL
from trialfleet.config import ExperimentConfig, load_config
from trialfleet.config.files import MAX_SEARCH_SPACE_BYTES
from trialfleet.errors import ConfigError

Write = Callable[..., Path]


def huge_space() -> dict[str, object]:
    choices = [f"option-{i:08d}" for i in range(MAX_SEARCH_SPACE_BYTES // 16 + 1)]
    return {"x": {"_type": "choice", "_value": choices}}


def test_a_search_space_file_past_the_limit_is_refused_naming_it(write_config: Write, workdir: Path) -> None:
    (workdir / "search_space.json").write_text(json.dumps(huge_space()))
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(MINIMAL))
    (problem,) = caught.value.problems
    assert problem.key_path == "searchSpaceFile"
    assert f"larger than the limit of {MAX_SEARCH_SPACE_BYTES:,} bytes" in problem.message


@pytest.mark.slow
def test_an_inline_search_space_past_the_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ExperimentConfig.from_dict(
            {
                "searchSpace": huge_space(),
                "trialCommand": "python3 trial.py",
                "trialCodeDirectory": str(tmp_path),
                "trialConcurrency": 1,
                "tuner": {"name": "TPE"},
                "trainingService": {"platform": "local"},
            }
        )
    (problem,) = caught.value.problems
    assert problem.key_path == "searchSpace"
    assert f"larger than the limit of {MAX_SEARCH_SPACE_BYTES:,} bytes" in problem.message


def test_a_search_space_under_the_limit_is_kept(write_config: Write, workdir: Path) -> None:
    space = {"x": {"_type": "choice", "_value": list(range(10_000))}}
    (workdir / "search_space.json").write_text(json.dumps(space))
    assert load_config(write_config(MINIMAL)).config.search_space == space
