"""What ``create`` prints of a legacy v1 config: its v2 form, secrets masked, and an honest heading."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialfleet.cli import output
from trialfleet.cli.launch import _load

DATA = Path(__file__).parents[1] / "config" / "data"


@pytest.fixture(autouse=True)
def fresh_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_console", None)


def test_an_nni_v1_config_is_asked_to_be_updated(capsys: pytest.CaptureFixture[str]) -> None:
    _load(DATA / "v1_pai.yml")
    out = capsys.readouterr().out
    assert "this is its v2 form, please update the file:" in out
    assert "very-secret-token" not in out and "token: '******'" in out


@pytest.mark.parametrize("file", ["v1_adl.yml", "v1_dlts.yml"])
def test_a_platform_nni_ran_only_from_v1_is_not_asked_to_update(
    capsys: pytest.CaptureFixture[str], file: str
) -> None:
    _load(DATA / file)
    out = " ".join(capsys.readouterr().out.split())
    assert "please update" not in out
    assert "only from v1 files, and there is no NNI v2 form" in out and "runs on trialfleet only" in out
