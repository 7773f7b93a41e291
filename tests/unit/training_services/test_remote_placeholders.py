"""A remote fleet that cannot be used is refused by ``create`` before the experiment is made: the shipped
example's placeholder hosts, key files that are not here, by the same rule as the service's start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cli_harness import free_port
from trialfleet.cli.main import main
from trialfleet.training_services.remote.config import RemoteConfig
from trialfleet.training_services.remote.placeholders import fleet_refusals

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "remote" / "config.yml"


def fleet(*machines: dict[str, object], partial: bool = False) -> RemoteConfig:
    return RemoteConfig.model_validate(
        {"platform": "remote", "trialCommand": "t", "machineList": list(machines), "allowPartialFleet": partial}
    )


def test_the_shipped_example_is_refused_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path))  # its key files (~/.ssh/id_ed25519) are not here either
    monkeypatch.chdir(tmp_path)
    code = main(["create", "--config", str(EXAMPLE), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code != 0 and "remote: 3 of 3 machine(s) cannot be used (edit machineList):" in err
    assert "worker1.example.org is a reserved example name (RFC 2606), not a host" in err
    assert "192.0.2.30 is a documentation address (RFC 5737), not a host" in err
    assert not (tmp_path / "home" / "experiments.json").exists() or "remote-example" not in (
        tmp_path / "home" / "experiments.json"
    ).read_text()


def test_usable_hosts_and_a_partial_fleet_pass(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("key")
    real = {"host": "10.1.2.3", "user": "u", "sshKeyFile": str(key)}
    assert fleet_refusals(fleet(real, {"host": "gpu.example.net", "user": "u", "password": "p"}, partial=True)) == []
    assert fleet_refusals(fleet(real, {"host": "node7", "user": "u", "password": "p"})) == []


def test_a_missing_key_file_refuses_a_whole_fleet(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    lines = fleet_refusals(fleet({"host": "10.1.2.3", "user": "u", "sshKeyFile": str(absent)}))
    assert lines == [
        "remote: 1 of 1 machine(s) cannot be used (edit machineList):",
        f"  - u@10.1.2.3:22: SSH key file {absent} does not exist",
    ]
