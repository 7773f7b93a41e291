"""``trainingService.fleetFile``: machines declared once and named by several configs, validated as the block."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from trialfleet.config.loader import load_config
from trialfleet.errors import ConfigError
from trialfleet.training_services.local.config import LocalConfig
from trialfleet.training_services.remote.config import RemoteConfig

HEAD = """\
searchSpaceFile: search_space.json
trialCommand: python3 trial.py
trialCodeDirectory: code
trialConcurrency: 1
trialGpuNumber: 1
tuner:
  name: TPE
trainingService:
"""

FLEET = """\
local:
  gpuIndices: [0, 1]
  maxTrialNumberPerGpu: 2
machines:
  - host: 10.0.0.2
    user: alice
    sshKeyFile: keys/id_ed25519
    gpuIndices: [0]
  - host: 10.0.0.3
    user: alice
    sshKeyFile: keys/id_ed25519
"""


@pytest.fixture
def fleet(workdir: Path) -> Path:
    """A fleet file in a directory of its own, beside its key file."""
    shared = workdir / "shared"
    (shared / "keys").mkdir(parents=True)
    (shared / "keys" / "id_ed25519").write_text("key")
    path = shared / "fleet.yml"
    path.write_text(FLEET)
    return path


def block(platform: str, *lines: str) -> str:
    return HEAD + f"  platform: {platform}\n" + "".join(f"  {line}\n" for line in lines)


def problems(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_local_takes_the_fleets_local_keys(write_config: Callable[..., Path], fleet: Path) -> None:
    config = load_config(write_config(block("local", "fleetFile: shared/fleet.yml"))).config
    service = config.training_service
    assert isinstance(service, LocalConfig)
    assert service.gpu_indices == [0, 1] and service.max_trial_number_per_gpu == 2
    assert service.fleet_file is None  # merged: a stored config never reads the fleet file again
    assert "fleetFile" not in str(config.to_json())


def test_configs_share_the_machines_with_key_files_from_the_fleets_directory(
    write_config: Callable[..., Path], fleet: Path
) -> None:
    loaded = [
        load_config(write_config(block("remote", "fleetFile: shared/fleet.yml"), name)).config
        for name in ("one.yml", "two.yml")
    ]
    services = [config.training_service for config in loaded]
    assert all(isinstance(s, RemoteConfig) for s in services)
    first, second = services
    assert first.machine_list == second.machine_list  # type: ignore[union-attr]
    machines = first.machine_list  # type: ignore[union-attr]
    assert [m.host for m in machines] == ["10.0.0.2", "10.0.0.3"] and machines[0].gpu_indices == [0]
    assert machines[0].ssh_key_file == fleet.parent / "keys" / "id_ed25519"


@pytest.mark.parametrize(
    ("fleet_text", "expected"),
    [
        (
            "local:\n  useActiveGpu: maybe\n",
            "trainingService.fleetFile.local.useActiveGpu: expected true or false",
        ),
        ("local:\n  gpuIndex: [0]\n", "trainingService.fleetFile.local.gpuIndex"),
        ("machines: []\n", "trainingService.fleetFile: the fleet file"),
        ("local: {}\nhosts: []\n", "trainingService.fleetFile.hosts: unknown key in the fleet file"),
        ("- a\n- b\n", "must be a mapping with local and/or machines"),
        ("local: [\n", "malformed YAML at line"),
    ],
)
def test_a_bad_fleet_file_is_named_with_the_key_path(
    write_config: Callable[..., Path], workdir: Path, fleet_text: str, expected: str
) -> None:
    (workdir / "fleet.yml").write_text(fleet_text)
    assert expected in problems(write_config(block("local", "fleetFile: fleet.yml")))


def test_remote_machines_are_validated_where_the_fleet_file_declares_them(
    write_config: Callable[..., Path], workdir: Path
) -> None:
    (workdir / "fleet.yml").write_text("machines:\n  - host: h\n    user: u\n    port: seventy\n")
    found = problems(write_config(block("remote", "fleetFile: fleet.yml")))
    assert "trainingService.fleetFile.machines[0].port: expected an integer" in found


def test_a_key_set_both_in_the_block_and_in_the_fleet_file_is_refused(
    write_config: Callable[..., Path], fleet: Path
) -> None:
    found = problems(write_config(block("local", "fleetFile: shared/fleet.yml", "gpuIndices: [1]")))
    assert "trainingService.gpuIndices: set both here and in the fleet file" in found
    machines = ["machineList:", "  - host: h", "    user: u"]
    found = problems(write_config(block("remote", "fleetFile: shared/fleet.yml", *machines)))
    assert "trainingService.machineList: set both here and in the fleet file" in found


def test_a_missing_fleet_file_and_other_platforms_are_refused(write_config: Callable[..., Path]) -> None:
    assert "fleet file" in problems(write_config(block("local", "fleetFile: nowhere.yml")))
    assert "does not exist" in problems(write_config(block("local", "fleetFile: nowhere.yml")))
    found = problems(write_config(block("slurm", "fleetFile: nowhere.yml")))
    assert "trainingService.fleetFile: unknown key 'fleetFile' for platform 'slurm'" in found
