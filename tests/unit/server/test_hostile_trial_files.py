"""The trial-file route against what a trial can make in its own directory (issue 44, items 4, 5 and 11):
a symbolic link loop, a name too long for the file system, links to the keeper's private command.json, HEAD."""

from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, Served


@pytest.mark.slow
def test_bad_names_are_4xx_without_a_path(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    trial_dir = served.experiment_dir / "trials" / "sA"
    os.symlink("loopB", trial_dir / "loopA")
    os.symlink("loopA", trial_dir / "loopB")
    for name, words in (("loopA", "symbolic link"), ("a" * 300, "too long")):
        response = client.get(f"{API}/trial-file/sA/{name}")
        assert 400 <= response.status_code < 500, (name[:20], response.status_code, response.text)
        message = response.json()["error"]
        assert words in message and str(served.experiment_dir) not in message, message


@pytest.mark.slow
def test_links_to_private_files_are_refused(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    trial_dir = served.experiment_dir / "trials" / "sA"
    (trial_dir / "command.json").write_text('{"env": {"RELAY_SECRET": "s3cret"}}')
    (trial_dir / "sub").mkdir()
    (trial_dir / "sub" / "command.worker.json").write_text('{"env": {"RELAY_SECRET": "s3cret"}}')
    os.symlink("command.json", trial_dir / "soft.txt")
    os.link(trial_dir / "command.json", trial_dir / "hard.txt")
    os.link(trial_dir / "sub" / "command.worker.json", trial_dir / "replica.txt")
    for name in ("soft.txt", "hard.txt", "replica.txt"):
        response = client.get(f"{API}/trial-file/sA/{name}")
        assert response.status_code == 403, (name, response.status_code, response.text)
        assert "s3cret" not in response.text
    assert client.get(f"{API}/trial-file/sA/stdout").text == "hello stdout\n"


def test_head_of_a_trial_file(populated: tuple[Served, TestClient]) -> None:
    _, client = populated
    response = client.head(f"{API}/trial-file/sA/stdout")
    assert response.status_code == 200, response.text
    assert response.headers["content-length"] == str(len("hello stdout\n")) and response.content == b""
    assert client.head(f"{API}/trial-file/sA/nothing.txt").status_code == 404
