"""Several experiments on 2 sshd test hosts of one GPU each (the nvidia-smi double): real managers, probes,
keepers and trials; each host has a GPU lease directory of its own (tests/integration/test_shared_fleet.py
checks the same on this machine)."""

from __future__ import annotations

import json
import signal
import urllib.request
from pathlib import Path

import pytest
from fleet import Fleet

from tests.integration.cli_harness import wait_until
from tests.integration.test_crash_recovery import free_ports, start_manager
from tests.integration.test_shared_fleet import (
    TRIAL_SCRIPT,
    assert_no_clash,
    finish,
    gpu_experiment,
    run_together,
    runs,
)
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.training_services.gpu_leases import machine_holdings

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture
def two_gpu_hosts(fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    hosts = fleet.hosts[:2]
    for host in hosts:
        gpu = {"index": 0, "uuid": f"GPU-{host.name}-0", "name": "T4", "memory_total": 15360}
        host.set_gpus([{**gpu, "memory_used": 0, "utilization": 0}])
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SHARED_FLEET_DIR", str(tmp_path))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL_SCRIPT)
    yield hosts
    for host in hosts:
        host.set_gpus([])


def remote_experiment(root: Path, hosts: list, trials: int) -> tuple[str, Path]:  # type: ignore[type-arg]
    doubles = str(Path(__file__).resolve().parents[2] / "doubles")  # pythonPath: first on the trials' PATH
    machines = [host.machine(useActiveGpu=False, pythonPath=doubles) for host in hosts]
    return gpu_experiment(root, trials, python="python3", platform="remote", machine_list=machines)


def held(hosts: list, experiment_id: str) -> int:  # type: ignore[type-arg]
    """How many GPUs of the hosts the experiment holds."""
    found = (machine_holdings(str(host.lease_dir)).get(experiment_id) for host in hosts)
    return sum(len(holding.gpus) for holding in found if holding is not None)


@pytest.mark.parametrize("experiments", [2, 5])
def test_experiments_sharing_two_hosts_gpus_never_clash(
    two_gpu_hosts: list, tmp_path: Path, experiments: int
) -> None:  # type: ignore[type-arg]
    created = [remote_experiment(tmp_path, two_gpu_hosts, trials=3) for _ in range(experiments)]
    records, handovers = run_together(tmp_path, created, trials=3)
    assert all(held(two_gpu_hosts, experiment_id) == 0 for experiment_id, _ in created)
    print(
        f"\n{experiments} experiments, {len(records)} trials on 2 hosts' GPUs, {handovers} hand-overs, no clash"
    )


def test_a_sigkilled_managers_leases_on_the_hosts_are_neither_lost_nor_leaked(
    two_gpu_hosts: list, tmp_path: Path
) -> None:  # type: ignore[type-arg]
    (first_id, first_dir), (_, second_dir) = (remote_experiment(tmp_path, two_gpu_hosts, 3) for _ in range(2))
    (tmp_path / f"hold-{first_id}").touch()
    first = start_manager(first_dir, "create")
    wait_until(
        lambda: held(two_gpu_hosts, first_id) == 2, "the first experiment's trials on both hosts' GPUs"
    )
    first.send_signal(signal.SIGKILL)
    first.wait()

    port = free_ports(1)[0]
    second = start_manager(second_dir, "create", port)
    store = ExperimentStore.for_experiment_dir(second_dir, readonly=True)
    wait_until(lambda: any(first_id in (t.message or "") for t in store.trials()), "a waiting reason", 120)
    waiting = [t for t in store.trials() if t.status is TrialStatus.WAITING]
    assert waiting and f"leased to experiment {first_id}" in (waiting[0].message or "")
    assert held(two_gpu_hosts, first_id) == 2, "the SIGKILLed manager's leases were lost"
    # the second experiment's web UI shows what the dead one holds on each host
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/api/v1/trialfleet/gpu-leases", timeout=60
    ) as answer:
        hosts = json.load(answer)["hosts"]
    shown = {
        name: held_there[first_id]["gpus"] for name, held_there in hosts.items() if first_id in held_there
    }
    assert sorted(shown.values()) == [[0], [0]] and all("@" in name for name in shown), hosts

    (tmp_path / f"hold-{first_id}").unlink()  # its trials end without a manager: their leases end with them
    wait_until(lambda: held(two_gpu_hosts, first_id) == 0, "the dead manager's leases to end")
    resumed = start_manager(first_dir, "resume")
    finish([second, resumed], [first_dir, second_dir])
    records = runs(tmp_path)
    assert len(records) == 6
    assert_no_clash(records)
