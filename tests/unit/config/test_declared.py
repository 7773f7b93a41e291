"""``declared``: the platforms and algorithms a config file names, read before (and without) validating it, for a
standby manager to import them while the CLI checks the config. Whatever the file holds, it answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialfleet.config.loader import declared


@pytest.mark.parametrize(
    ("text", "platforms"),
    [
        ("trainingService:\n  platform: remote\n  machineList: []\n", ["remote"]),
        ("trainingService:\n  - platform: local\n  - platform: slurm\n", ["local", "slurm"]),  # hybrid
        ("trialConcurrency: 2\ntrainingService: {platform: local, useActiveGpu: maybe}\n", ["local"]),
        (
            "authorName: a\ntrainingServicePlatform: remote\ntrial: {command: x, codeDir: .}\nmachineList: [{ip: h}]\n",
            ["remote"],
        ),  # v1
        ("trainingServicePlatform: pai\ntrial: {command: x, codeDir: .}\n", ["openpai"]),  # v1 name → v2
        ("trainingService: {machineList: []}\n", []),
        ("trainingService:\n  - platform: 3\n  - not a block\n", []),
        ("trialConcurrency: 2\n", []),
        ("- a list\n", []),
        ("trainingService: [unclosed\n", []),  # malformed YAML: load_config says so
        ("", []),
    ],
)
def test_the_platforms_a_config_names(tmp_path: Path, text: str, platforms: list[str]) -> None:
    config = tmp_path / "config.yml"
    config.write_text(text)
    assert declared(config).platforms == platforms


def test_a_json_file_and_a_missing_one(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"trainingService": {"platform": "remote",\t"machineList": []}}')
    assert declared(config).platforms == ["remote"]
    assert declared(tmp_path / "missing.yml").platforms == []
    assert declared(tmp_path).platforms == []  # a directory


@pytest.mark.parametrize(
    ("text", "algorithms"),
    [
        (
            "tuner: {name: TPE}\nassessor: {name: Medianstop}\n",
            [("tuner", "TPE"), ("assessor", "Medianstop")],
        ),
        ("advisor: {name: Hyperband}\n", [("advisor", "Hyperband")]),
        ("tuner: {className: my.Tuner}\n", []),  # custom: no built-in to import
        ("tuner: TPE\nassessor: {name: 3}\n", []),  # not blocks of a name: load_config says what is wrong
        (
            "authorName: a\ntrainingServicePlatform: local\ntrial: {command: x, codeDir: .}\n"
            "tuner: {builtinTunerName: Anneal}\n",
            [("tuner", "Anneal")],
        ),  # v1
        ("tuner: {name: [unclosed\n", []),
    ],
)
def test_the_algorithms_a_config_names(tmp_path: Path, text: str, algorithms: list[tuple[str, str]]) -> None:
    config = tmp_path / "config.yml"
    config.write_text(text)
    assert declared(config).algorithms == algorithms
