"""One YAML loader for every YAML file: anchors and aliases work, alias explosions are refused by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.config.conftest import MINIMAL
from trialfleet.config import load_config
from trialfleet.config.files import MAX_YAML_ALIASES, parse_yaml
from trialfleet.errors import AlgorithmError, ConfigError
from trialfleet.tuning.user_algorithms import register, registry_path

Write = Callable[..., Path]


def laughs(levels: int = 9, indent: str = "") -> str:
    """The classic "billion laughs": nine aliases of nine aliases of ..., 9**levels strings once expanded."""
    lines = [f'{indent}l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        aliases = ",".join([f"*l{level - 1}"] * 9)
        lines.append(f"{indent}l{level}: &l{level} [{aliases}]")
    return "\n".join(lines) + "\n"


#: a valid config but for the tuner's classArgs, which expand to 9**9 strings
BOMB = MINIMAL.replace("  name: TPE\n", "  name: TPE\n  classArgs:\n" + laughs(indent="    "))


def test_billion_laughs_config_is_refused_naming_the_file(write_config: Write) -> None:
    assert len(BOMB.encode()) < 1000 and BOMB.count("*l") == 8 * 9
    path = write_config(BOMB)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: YAML refused at line ")
    assert "more than 1,000,000 values once its aliases (*name) are expanded" in message


def test_billion_laughs_search_space_file_is_refused_naming_it(write_config: Write, workdir: Path) -> None:
    (workdir / "search_space.json").write_text(laughs() + "x: {_type: choice, _value: *l8}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(MINIMAL))
    (problem,) = caught.value.problems
    assert problem.key_path == "searchSpaceFile"
    assert problem.message.startswith(
        f"search space file {workdir.resolve()}/search_space.json: YAML refused"
    )
    assert "once its aliases (*name) are expanded" in problem.message


def test_a_recursive_alias_is_refused(write_config: Write) -> None:
    path = write_config(
        MINIMAL.replace("tuner:\n  name: TPE", "tuner:\n  name: TPE\n  classArgs: &me {a: *me}")
    )
    with pytest.raises(
        ConfigError, match=r"YAML refused at line 7, column 22: an alias .* recursive structure"
    ):
        load_config(path)


def test_too_many_aliases_are_refused() -> None:
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    with pytest.raises(Exception, match=f"more than {MAX_YAML_ALIASES} aliases"):
        parse_yaml(many)
    assert parse_yaml(many.replace("*a]", "1]"))["b"].count(1) == MAX_YAML_ALIASES + 1


@pytest.mark.slow
def test_nesting_beyond_the_stack_is_refused() -> None:
    with pytest.raises(Exception, match="nested too deeply"):
        parse_yaml("[" * 100_000)


def test_configs_with_anchors_still_load(write_config: Write) -> None:
    text = """\
        searchSpace:
          lr: &uniform {_type: uniform, _value: [0.0, 1.0]}
          momentum: *uniform
        trialCommand: python3 trial.py
        trialCodeDirectory: code
        trialConcurrency: 2
        tuner:
          name: TPE
          classArgs: &args {optimize_mode: maximize}
        assessor:
          name: Medianstop
          classArgs:
            <<: *args
            start_step: 3
        trainingService:
          platform: local
        """
    config = load_config(write_config(text)).config
    assert config.search_space == {"lr": {"_type": "uniform", "_value": [0.0, 1.0]}} | {
        "momentum": {"_type": "uniform", "_value": [0.0, 1.0]}
    }
    assert config.assessor is not None
    assert config.assessor.class_args == {"optimize_mode": "maximize", "start_step": 3}


def test_algorithm_meta_files_use_the_same_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_CONFIG_DIR", str(tmp_path / "cfg"))
    meta = tmp_path / "meta.yml"
    meta.write_text(laughs() + "algoType: tuner\nbuiltinName: Laughs\nclassName: m.T\nextra: *l8\n")
    with pytest.raises(AlgorithmError, match=f"cannot read algorithm meta file {meta}: YAML refused at line"):
        register(meta)
    assert not registry_path().exists()
