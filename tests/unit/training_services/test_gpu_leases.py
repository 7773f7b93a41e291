"""Machine-wide GPU leases between experiments: real keepers and trials, GPUs from the nvidia-smi double."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from training_service_helpers import (
    HANG_GUARD,
    fake_gpu,
    held_command,
    poll_until_ended,
    spec,
    wait_for_file,
)

from trialfleet.testing import harness, make_context
from trialfleet.training_services import LocalConfig
from trialfleet.training_services.gpu import GpuInfo, allocate_gpus
from trialfleet.training_services.gpu_leases import GpuLeases, Taken, machine_holdings
from trialfleet.training_services.spec import Deferred, Submitted
from trialfleet.trial_keeper import leases


@pytest.fixture
def experiment(tmp_path: Path, local_services):  # type: ignore[no-untyped-def]
    """Start the local platform of experiment ``name`` (its own directory, the machine's lease directory)."""

    def start(name: str, **options: object):  # type: ignore[no-untyped-def]
        config = LocalConfig(trial_command="unused", use_active_gpu=False, trial_gpu_number=1, **options)
        return local_services(make_context(tmp_path / name, config, name))

    return start


def lease_dir() -> str:
    return os.environ["TRIALFLEET_LEASE_DIR"]


async def until(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_GUARD
    while not condition():
        assert loop.time() < deadline, "stuck: the condition never held"
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_a_gpu_leased_to_one_experiment_waits_for_it_in_another(fake_gpus, experiment, dirs) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    first, second = await experiment("first"), await experiment("second")
    for trial_id in ("a", "b"):
        command = held_command(control, trial_id, "$CUDA_VISIBLE_DEVICES")
        assert isinstance(await first.submit(spec(trial_id, command, code, gpu_number=1)), Submitted)
    waiting = await second.submit(
        spec("x", held_command(control, "x", "$CUDA_VISIBLE_DEVICES"), code, gpu_number=1)
    )
    assert isinstance(waiting, Deferred)
    assert "GPU 0 is leased to experiment first (trial a)" in waiting.reason
    holdings = machine_holdings()
    assert sorted(holdings["first"].gpus) == [0, 1]
    assert holdings["second"].gpus == [] and holdings["second"].waiting == 1

    freed = (await wait_for_file(control / "a.out")).strip()
    (control / "a.release").touch()
    await poll_until_ended(first, {"a"}, {})
    assert isinstance(
        await second.submit(
            spec("x", held_command(control, "x", "$CUDA_VISIBLE_DEVICES"), code, gpu_number=1)
        ),
        Submitted,
    )
    assert (await wait_for_file(control / "x.out")).strip() == freed
    assert "second" in machine_holdings() and machine_holdings()["second"].waiting == 0
    for trial_id in ("b", "x"):
        (control / f"{trial_id}.release").touch()
    await poll_until_ended(first, {"b"}, {})
    await poll_until_ended(second, {"x"}, {})
    assert machine_holdings() == {}


@pytest.mark.slow
async def test_max_trials_per_gpu_counts_every_experiment(fake_gpus, experiment, dirs) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0)])
    first = await experiment("first", max_trial_number_per_gpu=2)
    second = await experiment("second", max_trial_number_per_gpu=2)
    assert isinstance(
        await first.submit(spec("a", held_command(control, "a"), code, gpu_number=1)), Submitted
    )
    assert isinstance(
        await first.submit(spec("b", held_command(control, "b"), code, gpu_number=1)), Submitted
    )
    refused = await second.submit(spec("x", "true", code, gpu_number=1))
    assert isinstance(refused, Deferred) and "leased to experiment first" in refused.reason
    for trial_id in ("a", "b"):
        (control / f"{trial_id}.release").touch()
    await poll_until_ended(first, {"a", "b"}, {})


@pytest.mark.slow
async def test_the_keeper_and_its_trial_hold_the_lease_without_the_manager(
    fake_gpus, experiment, dirs
) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0)])
    first = await experiment("first")
    submitted = await first.submit(spec("a", held_command(control, "a"), code, gpu_number=1))
    assert isinstance(submitted, Submitted)
    await wait_for_file(control / "a.out")
    first._release_gpus("a")  # as if its manager were gone: the keeper's hold alone keeps the lease
    assert machine_holdings()["first"].gpus == [0]
    os.kill(submitted.handle["keeper_pid"], signal.SIGKILL)  # and the trial's own processes hold it still
    await harness.wait_until_gone([submitted.handle["keeper_pid"]])
    assert machine_holdings()["first"].gpus == [0]
    (control / "a.release").touch()  # the trial ends: nothing holds the lease any more
    await until(lambda: machine_holdings() == {})


def test_waiting_experiments_take_turns(fake_gpus, tmp_path: Path) -> None:
    gpus = [GpuInfo(0, 100, 0, 0.0, 0), GpuInfo(1, 100, 0, 0.0, 0)]

    def choose(count, assigned, leased):  # type: ignore[no-untyped-def]
        return allocate_gpus(gpus, count, assigned=assigned, leased=leased)

    first, second = GpuLeases("first"), GpuLeases("second")
    assert isinstance(first.take("a", "a_0", 1, choose), Taken)
    assert isinstance(first.take("b", "b_0", 1, choose), Taken)
    assert isinstance(second.take("x", "x_0", 1, choose), str)  # second waits from now
    first.release("a")
    # a GPU is free, but the second experiment has waited longer: the first one waits its turn
    refused = first.take("c", "c_0", 1, choose)
    assert isinstance(refused, str) and "its turn comes after experiment second" in refused
    assert isinstance(second.take("x", "x_0", 1, choose), Taken)
    first.release("b")
    # the first experiment now waited longer than the second, which has just been served
    assert isinstance(second.take("y", "y_0", 1, choose), str)
    assert isinstance(first.take("c", "c_0", 1, choose), Taken)
    first.close()
    second.close()


RACER = textwrap.dedent(
    """
    import json, sys, time
    from trialfleet.training_services.gpu import GpuInfo, allocate_gpus
    from trialfleet.training_services.gpu_leases import GpuLeases, Taken
    name, start, out = sys.argv[1], sys.argv[2], sys.argv[3]
    gpus = [GpuInfo(0, 100, 0, 0.0, 0), GpuInfo(1, 100, 0, 0.0, 0)]
    choose = lambda count, assigned, leased: allocate_gpus(gpus, count, assigned=assigned, leased=leased)
    mine = GpuLeases(name)
    while time.time() < float(start):
        pass
    taken = mine.take("t", "t_0", 1, choose)
    with open(out, "w") as f:
        json.dump(taken.gpus if isinstance(taken, Taken) else None, f)
    sys.stdin.read()  # hold the lease until told to end
    """
)


@pytest.mark.slow
def test_racing_managers_never_take_one_gpu_twice(fake_gpus, tmp_path: Path) -> None:
    start = time.time() + 1.0
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, f"exp{i}", str(start), str(tmp_path / f"exp{i}.json")],
            stdin=subprocess.PIPE,
        )
        for i in range(6)
    ]
    try:
        deadline = time.monotonic() + HANG_GUARD
        for i in range(6):
            while not (tmp_path / f"exp{i}.json").exists():
                assert time.monotonic() < deadline, f"stuck: racer {i} never answered"
                time.sleep(0.02)
        results = [json.loads((tmp_path / f"exp{i}.json").read_text()) for i in range(6)]
    finally:
        for racer in racers:
            racer.stdin.close()  # type: ignore[union-attr]
            racer.wait()
    taken = [gpus for gpus in results if gpus is not None]
    assert sorted(g for gpus in taken for g in gpus) == [0, 1]
    assert leases.live_leases(lease_dir()) == []  # the racers ended: their leases ended with them


def test_an_ssh_hosts_leases_serve_waiting_experiments_in_turn(tmp_path: Path) -> None:
    """What an SSH host's probe does with the GPUs a manager chose: lease them, or refuse (its wait noted)."""
    path = leases.directory(str(tmp_path / "host"))

    def take(experiment: str, trial: str, gpu: int):  # type: ignore[no-untyped-def]
        record = {"experiment": experiment, "trial": trial, "attempt": f"{trial}_0"}
        return leases.take_chosen(path, record, [gpu], 1, usable=[0, 1])

    first, second = take("a", "a1", 0), take("a", "a2", 1)
    assert isinstance(first, tuple) and isinstance(second, tuple)
    assert take("b", "b1", 0) == "GPU 0 is leased to experiment a (trial a1)"
    assert [w["experiment"] for w in leases.live_waits(path)] == ["b"]
    leases.release(first[0])  # a1 ended: GPU 0 is free, but b has waited longer
    refused = take("a", "a3", 0)
    assert isinstance(refused, str) and refused.startswith("its turn comes after experiment b")
    served = take("b", "b1", 0)
    assert isinstance(served, tuple)
    assert [w["experiment"] for w in leases.live_waits(path)] == ["a"]  # b was served; a waits its turn now
    leases.release(second[0] + served[0])
    assert isinstance(take("a", "a3", 0), tuple)
