"""Bad configs: one ConfigError naming the file, the user's key path and what was expected, in plain words."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.config.conftest import MINIMAL
from trialfleet.config import load_config
from trialfleet.errors import ConfigError

Write = Callable[..., Path]


def _error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.file == str(path)
    assert str(caught.value).startswith(str(path))
    return caught.value


def _problems(path: Path) -> dict[str, str]:
    return {p.key_path: p.message for p in _error(path).problems}


def test_minimal_config_is_valid(write_config: Write) -> None:
    assert load_config(write_config(MINIMAL)).config.trial_concurrency == 1


@pytest.mark.parametrize(
    ("old", "new", "key_path", "message"),
    [
        (
            "trialConcurrency: 1",
            "trialConcurency: 1",
            "trialConcurency",
            "unknown key 'trialConcurency' (did you mean 'trialConcurrency'?)",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: abc",
            "trialConcurrency",
            "expected an integer, got 'abc'",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 0",
            "trialConcurrency",
            "expected a number greater than 0, got 0",
        ),
        ("trialConcurrency: 1", "trialConcurrency: 1.5", "trialConcurrency", "expected an integer, got 1.5"),
        ("trialConcurrency: 1", "experimentName: x", "trialConcurrency", "required field is missing"),
        ("  name: TPE", "  nmae: TPE", "tuner.nmae", "unknown key 'nmae' (did you mean 'name'?)"),
        ("tuner:\n  name: TPE\n", "", "tuner", "required field is missing"),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\ndebug: yes please",
            "debug",
            "expected true or false, got 'yes please'",
        ),
        (
            "trialCommand: python3 trial.py",
            "trialCommand: [a, b]",
            "trialCommand",
            "expected a string, got a list",
        ),
        ("trialCommand: python3 trial.py\n", "", "trialCommand", "required field is missing"),
        (
            "platform: local",
            "platform: mars",
            "trainingService.platform",
            "unknown platform 'mars'; expected one of adl, aml, dlc, dlts, frameworkcontroller, kubeflow, local",
        ),
        (
            "platform: local",
            "platform: Remot",
            "trainingService.platform",
            "unknown platform 'Remot' (did you mean 'remote'?); expected one of adl, aml, dlc, dlts",
        ),
        ("  platform: local", "  gpuIndices: 0", "trainingService.platform", "required field is missing"),
        (
            "  platform: local",
            "  platform: local\n  machineList: []",
            "trainingService.machineList",
            "unknown key 'machineList' for platform 'local'",
        ),
        (
            "  platform: local",
            "  platform: local\n  gpuIndices: 0,0",
            "trainingService.gpuIndices",
            "GPU indices must not repeat, got '0,0'",
        ),
        (
            "  platform: local",
            "  platform: local\n  maxTrialNumberPerGpu: 2",
            "trainingService.maxTrialNumberPerGpu",
            "can only differ from 1 when trialGpuNumber is set",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nmaxTrialDuration: 1 week",
            "maxTrialDuration",
            "expected a duration such as '30s'",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nmaxExperimentDuration: 0s",
            "maxExperimentDuration",
            "expected a number greater than 0",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nlogLevel: verbose",
            "logLevel",
            "expected 'fatal', 'error', 'warning', 'info', 'debug' or 'trace', got 'verbose'",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nexperimentType: nas",
            "experimentType",
            "expected 'hpo', got 'nas'",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nuseAnnotation: true",
            "useAnnotation",
            "useAnnotation is not supported",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nmaxTrialRetries: -1",
            "maxTrialRetries",
            "expected a number at least 0, got -1",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\ntrialGpuNumber: -1",
            "trialGpuNumber",
            "expected a number at least 0, got -1",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\ntunerGpuIndices: [-1]",
            "tunerGpuIndices",
            "GPU indices cannot be negative",
        ),
        (
            "trialConcurrency: 1",
            "trialConcurrency: 1\nsearchSpace: {}",
            "searchSpace",
            "set either searchSpace or searchSpaceFile, not both",
        ),
        (
            "searchSpaceFile: search_space.json",
            "searchSpace: [1, 2]",
            "searchSpace",
            "expected a mapping (key: value pairs), got a list",
        ),
        (
            "searchSpaceFile: search_space.json\n",
            "",
            "searchSpaceFile",
            "required field is missing (or give searchSpace inline)",
        ),
        (
            "trialCodeDirectory: code",
            "trial_code_directory: nowhere",
            "trial_code_directory",
            "code directory {dir}/nowhere does not exist",
        ),
        (
            "trialCodeDirectory: code",
            "trialCodeDirectory: search_space.json",
            "trialCodeDirectory",
            "code directory {dir}/search_space.json is not a directory",
        ),
        (
            "searchSpaceFile: search_space.json",
            "searchSpaceFile: missing.json",
            "searchSpaceFile",
            "search space file {dir}/missing.json does not exist",
        ),
        (
            "searchSpaceFile: search_space.json",
            "searchSpaceFile: code",
            "searchSpaceFile",
            "search space file {dir}/code is not a regular file",
        ),
        (
            "  name: TPE",
            "  name: TPE\n  className: my.Tuner",
            "tuner.name",
            "set either name (built-in) or className (custom), not both",
        ),
        (
            "  name: TPE",
            "  className: my.Tuner\n  codeDirectory: gone",
            "tuner.codeDirectory",
            "code directory {dir}/gone does not exist",
        ),
        (
            "  name: TPE",
            "  classArgs: {}",
            "tuner.name",
            "required field is missing (or set className for a custom algorithm)",
        ),
        (
            "tuner:",
            "advisor:\n  name: BOHB\ntuner:",
            "advisor",
            "advisor is deprecated and cannot be set together with tuner",
        ),
    ],
)
def test_bad_value(
    write_config: Write, workdir: Path, old: str, new: str, key_path: str, message: str
) -> None:
    assert old in MINIMAL
    path = write_config(MINIMAL.replace(old, new, 1))
    error = _error(path)
    expected = message.format(dir=workdir.resolve())
    assert [p.key_path for p in error.problems] == [key_path], str(error)
    assert expected in error.problems[0].message
    assert f"  - {key_path}: {error.problems[0].message}" in str(error)


def test_all_problems_in_one_error(write_config: Write, workdir: Path) -> None:
    path = write_config(
        """\
        searchSpaceFile: nope.json
        trialCommand: python3 trial.py
        trialCodeDirectory: missing_code
        trialConcurrency: lots
        maxTrialNumbr: 3
        tuner: {name: TPE}
        trainingService: {platform: local}
        """
    )
    assert _problems(path) == {
        "maxTrialNumbr": "unknown key 'maxTrialNumbr' (did you mean 'maxTrialNumber'?)",
        "searchSpaceFile": f"search space file {workdir.resolve()}/nope.json does not exist",
        "trialConcurrency": "expected an integer, got 'lots'",
        "trialCodeDirectory": f"code directory {workdir.resolve()}/missing_code does not exist",
    }


def test_nested_errors_inside_machine_list(write_config: Write) -> None:
    path = write_config(
        """\
        searchSpaceFile: search_space.json
        trial_command: python3 trial.py
        trialCodeDirectory: code
        trialConcurrency: 1
        tuner: {name: TPE}
        training_service:
          platform: remote
          machine_list:
            - host: h1
              user: alice
              port: abc
            - host: h2
              prot: 22
            - host: h3
              user: carol
              port: 70000
              maxTrialNumberPerGpu: 2
        """
    )
    error = _error(path)
    assert {p.key_path: p.message for p in error.problems} == {
        "training_service.machine_list[0].port": "expected an integer, got 'abc'",
        "training_service.machine_list[1].prot": "unknown key 'prot' (did you mean 'port'?)",
        "training_service.machine_list[1].user": "required field is missing",
        "training_service.machine_list[2].port": "expected a number less than 65536, got 70000",
    }
    assert "  - training_service.machine_list[0].port: expected an integer, got 'abc'" in str(error)


def test_fleet_rule_names_the_machine(write_config: Write) -> None:
    path = write_config(
        MINIMAL.replace(
            "  platform: local",
            "  platform: remote\n  machineList:\n    - {host: a, user: u}\n    - {host: b, user: u, maxTrialNumberPerGpu: 3}",
        )
    )
    assert _problems(path) == {
        "trainingService.machineList[1].maxTrialNumberPerGpu": (
            "can only differ from 1 when trialGpuNumber is set to a positive number"
        )
    }


def test_secrets_are_not_echoed(write_config: Write) -> None:
    path = write_config(
        MINIMAL.replace(
            "  platform: local",
            "  platform: remote\n  machineList:\n    - {host: a, user: u, password: [s3cr3t]}",
        )
    )
    error = _error(path)
    assert _problems(path) == {
        "trainingService.machineList[0].password": "expected a string, got a value that is not shown (it is a secret)"
    }
    assert "s3cr3t" not in str(error)


def test_slurm_shared_directory_must_be_absolute_with_a_login_node(write_config: Write) -> None:
    path = write_config(
        MINIMAL.replace(
            "  platform: local",
            "  platform: slurm\n  sharedDirectory: ~/runs\n  loginNode: {host: login, user: alice}",
        )
    )
    assert _problems(path) == {
        "trainingService.sharedDirectory": "must be an absolute path on the cluster when loginNode is set"
    }


def test_malformed_yaml_names_the_line(write_config: Write) -> None:
    path = write_config("trialCommand: python3 trial.py\ntuner:\n  name: [TPE\ntrialConcurrency: 1\n")
    error = _error(path)
    assert error.problems == []
    assert "malformed YAML at line 4, column" in str(error)


def test_json_config(write_config: Write) -> None:
    text = '{\n\t"searchSpace": {},\n\t"trialCommand": "python3 trial.py",\n\t"trialConcurrency": 2,\n'
    text += '\t"tuner": {"name": "TPE"},\n\t"trainingService": {"platform": "local"}\n}\n'
    assert load_config(write_config(text, "config.json")).config.trial_concurrency == 2
    assert "malformed JSON at line 3, column 1" in str(_error(write_config('{\n"a": 1\n', "broken.json")))


def test_repeated_yaml_key_names_the_line(write_config: Write) -> None:
    path = write_config(MINIMAL + "trialCommand: python3 other.py\n")
    assert "malformed YAML at line 9, column 1: found duplicate key 'trialCommand'" in str(_error(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "the config must be a mapping of keys to values, got a list"),
        ("just a string\n", "the config must be a mapping of keys to values, got 'just a string'"),
        ("", "the config file is empty"),
        ("# only a comment\n", "the config file is empty"),
    ],
)
def test_top_level_must_be_a_mapping(write_config: Write, text: str, message: str) -> None:
    assert str(_error(write_config(text))) == f"{write_config(text)}: {message}"


def test_missing_config_file(tmp_path: Path) -> None:
    _error_text = str(_error(tmp_path / "absent.yml"))
    assert _error_text == f"{tmp_path / 'absent.yml'}: config file {tmp_path / 'absent.yml'} does not exist"


def test_config_file_not_utf8(write_config: Write) -> None:
    path = write_config("x")
    path.write_bytes(b"trialCommand: \xff\xfe\n")
    assert "is not UTF-8 text" in str(_error(path))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must hold a mapping of parameter names to specs, got a list"),
        ("{broken: [}", "is neither JSON nor YAML: malformed YAML at line 1, column 11"),
    ],
)
def test_bad_search_space_file(write_config: Write, workdir: Path, content: str, message: str) -> None:
    (workdir / "search_space.json").write_text(content)
    problems = _problems(write_config(MINIMAL))
    assert list(problems) == ["searchSpaceFile"]
    assert message in problems["searchSpaceFile"]


def test_a_search_space_file_is_named_in_its_errors(tmp_path: Path) -> None:
    from trialfleet.startup import preflight

    (tmp_path / "space.json").write_text('{"lr": {"_type": "choise", "_value": [0.1]}}')
    (tmp_path / "config.yml").write_text(
        "searchSpaceFile: space.json\ntrialCommand: python3 t.py\ntrialConcurrency: 1\n"
        "tuner: {name: Random}\ntrainingService: {platform: local}\n"
    )
    with pytest.raises(ConfigError) as caught:
        preflight(load_config(tmp_path / "config.yml").config)
    assert str(caught.value).startswith(f"{tmp_path / 'space.json'}: lr: search space parameter 'lr': unknown _type")
