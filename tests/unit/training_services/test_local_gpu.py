"""Local GPU scheduling end to end: real trials, GPUs from the nvidia-smi double."""

from __future__ import annotations

import pytest
from training_service_helpers import fake_gpu, held_command, poll_until_ended, spec, wait_for_file

from trialfleet.errors import PlatformError
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.spec import Deferred, Submitted


@pytest.fixture
def service_for(context_for, local_services):  # type: ignore[no-untyped-def]
    return lambda **options: local_services(context_for(**options))


@pytest.mark.slow
async def test_two_gpus_three_trials(fake_gpus, service_for, dirs) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    service = await service_for(trial_gpu_number=1, use_active_gpu=False)
    report = "$CUDA_VISIBLE_DEVICES"
    first = [
        await service.submit(spec(t, held_command(control, t, report), code, gpu_number=1)) for t in "ab"
    ]
    assert all(isinstance(s, Submitted) for s in first)
    third = spec("c", held_command(control, "c", report), code, gpu_number=1)
    deferred = await service.submit(third)
    assert isinstance(deferred, Deferred)
    assert deferred.reason.startswith("waiting for 1 free GPU(s): 0 of 2 usable GPU(s) free")
    seen = {t: (await wait_for_file(control / f"{t}.out")).strip() for t in "ab"}
    assert sorted(seen.values()) == ["0", "1"]

    (control / "a.release").touch()
    ended: dict[str, TrialEnded] = {}
    await poll_until_ended(service, {"a"}, ended)
    assert isinstance(await service.submit(third), Submitted)
    assert (await wait_for_file(control / "c.out")).strip() == seen["a"]
    (control / "b.release").touch()
    (control / "c.release").touch()
    await poll_until_ended(service, {"b", "c"}, ended)
    assert {e.status.value for e in ended.values()} == {"SUCCEEDED"}


@pytest.mark.slow
async def test_a_trial_may_take_every_gpu(fake_gpus, service_for, dirs) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    service = await service_for(trial_gpu_number=2, use_active_gpu=False)
    assert isinstance(
        await service.submit(
            spec("all", held_command(control, "all", "$CUDA_VISIBLE_DEVICES"), code, gpu_number=2)
        ),
        Submitted,
    )
    assert (await wait_for_file(control / "all.out")).strip() == "0,1"
    (control / "all.release").touch()
    await poll_until_ended(service, {"all"}, {})


@pytest.mark.slow
async def test_start_fails_when_the_machine_has_too_few_gpus(fake_gpus, service_for) -> None:
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    with pytest.raises(PlatformError, match="trialGpuNumber is 3, but a trial needs 3 GPU"):
        await service_for(trial_gpu_number=3, use_active_gpu=True)


@pytest.mark.slow
async def test_start_fails_without_any_gpu(fake_gpus, service_for) -> None:
    fake_gpus([])
    with pytest.raises(PlatformError, match="no GPU found"):
        await service_for(trial_gpu_number=1, use_active_gpu=True)


@pytest.mark.slow
async def test_active_gpus_and_gpu_indices_are_honoured(fake_gpus, service_for, dirs) -> None:
    code, control = dirs
    gpus = [fake_gpu(0), fake_gpu(1), fake_gpu(2)]
    fake_gpus(gpus, [{"gpu_uuid": gpus[2]["uuid"], "pid": 99, "process_name": "other", "used_memory": 10}])
    service = await service_for(trial_gpu_number=1, use_active_gpu=False, gpu_indices="1,2")
    command = held_command(control, "only", "$CUDA_VISIBLE_DEVICES")
    assert isinstance(await service.submit(spec("only", command, code, gpu_number=1)), Submitted)
    assert (await wait_for_file(control / "only.out")).strip() == "1"
    deferred = await service.submit(spec("next", "true", code, gpu_number=1))
    assert isinstance(deferred, Deferred) and "GPU 2 is used by 1 other process(es)" in deferred.reason
    (control / "only.release").touch()
    await poll_until_ended(service, {"only"}, {})


async def test_gpu_number_zero_hides_gpus_and_none_leaves_them(
    fake_gpus, service_for, dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, control = dirs
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    service = await service_for()
    report = "[${CUDA_VISIBLE_DEVICES-unset}]"
    await service.submit(spec("zero", held_command(control, "zero", report), code, gpu_number=0))
    await service.submit(spec("none", held_command(control, "none", report), code, gpu_number=None))
    assert (await wait_for_file(control / "zero.out")).strip() == "[]"
    assert (await wait_for_file(control / "none.out")).strip() == "[3]"
    for trial_id in ("zero", "none"):
        (control / f"{trial_id}.release").touch()
    await poll_until_ended(service, {"zero", "none"}, {})


@pytest.mark.slow
async def test_adopted_trials_keep_their_gpus(fake_gpus, service_for, dirs) -> None:
    code, control = dirs
    fake_gpus([fake_gpu(0), fake_gpu(1)])
    first = await service_for(trial_gpu_number=1, use_active_gpu=False)
    handles = {}
    for trial_id in ("a", "b"):
        submitted = await first.submit(spec(trial_id, held_command(control, trial_id), code, gpu_number=1))
        assert isinstance(submitted, Submitted)
        handles[trial_id] = submitted.handle
    await first.close(kill_trials=False)
    second = await service_for(trial_gpu_number=1, use_active_gpu=False)
    for trial_id, handle in handles.items():
        await second.adopt(trial_id, handle, {})
    assert isinstance(await second.submit(spec("c", "true", code, gpu_number=1)), Deferred)
    (control / "a.release").touch()
    await poll_until_ended(second, {"a"}, {})
    assert isinstance(await second.submit(spec("c", "true", code, gpu_number=1)), Submitted)
    (control / "b.release").touch()
    await poll_until_ended(second, {"b", "c"}, {})
