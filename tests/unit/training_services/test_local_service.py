"""Local-platform behaviour beyond the shared contract: trial environment, directories, keeper loss, wake-ups."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from training_service_helpers import HANG_GUARD, held_command, poll_until_ended, spec, wait_for_file

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.environment import environment_change
from trialfleet.training_services.events import TrialEnded
from trialfleet.training_services.local import LocalTrainingService
from trialfleet.training_services.spec import Submitted


@pytest.fixture
async def service(context_for):  # type: ignore[no-untyped-def]
    service = LocalTrainingService(context_for())
    await service.start()
    yield service
    await service.close(kill_trials=True)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def wait_until_dead(pid: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_GUARD
    while alive(pid):
        assert loop.time() < deadline, f"stuck: process {pid} is still alive"
        await asyncio.sleep(0.02)


async def test_trial_environment(service, dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    code, control = dirs
    monkeypatch.setenv("NNI_TRIAL_COMMAND_CHANNEL", "http://localhost:1/should-not-leak")
    monkeypatch.setenv("MANAGER_ONLY", "inherited")
    dump = f"env > {control}/env.txt"
    trial = spec(
        "envtr", dump, code, sequence_id=12, attempt=2, env={"PYTHONPATH": "/shim", "MANAGER_ONLY": "over"}
    )
    submitted = await service.submit(trial)
    assert isinstance(submitted, Submitted)
    await poll_until_ended(service, {"envtr"}, {})
    env = dict(line.split("=", 1) for line in (control / "env.txt").read_text().splitlines() if "=" in line)
    trial_dir = service.context.trials_dir.absolute() / "envtr.2"
    assert submitted.handle["trial_dir"] == str(trial_dir)
    assert submitted.location == f"local:{trial_dir}"
    expected = {
        "NNI_PLATFORM": "local",
        "NNI_EXP_ID": "unitexp",
        "NNI_TRIAL_JOB_ID": "envtr",
        "NNI_SYS_DIR": str(trial_dir),
        "NNI_OUTPUT_DIR": str(trial_dir),
        "NNI_TRIAL_SEQ_ID": "12",
        "NNI_CODE_DIR": str(code),
        "PYTHONPATH": "/shim",
        "MANAGER_ONLY": "over",
        "PWD": str(code),
    }
    assert {key: env.get(key) for key in expected} == expected
    assert "NNI_TRIAL_COMMAND_CHANNEL" not in env
    assert "CUDA_VISIBLE_DEVICES" not in env or env["CUDA_VISIBLE_DEVICES"] == os.environ.get(
        "CUDA_VISIBLE_DEVICES"
    )
    assert json.loads(json.dumps(submitted.handle)) == submitted.handle


async def test_command_json_is_private(service, dirs) -> None:
    code, _ = dirs
    submitted = await service.submit(spec("priv", "true", code))
    await poll_until_ended(service, {"priv"}, {})
    assert (Path(submitted.handle["trial_dir"]) / "command.json").stat().st_mode & 0o077 == 0


async def test_exit_wakes_the_manager_without_polling(service, dirs) -> None:
    code, control = dirs
    await service.submit(spec("wake", held_command(control, "wake"), code))
    await wait_for_file(control / "wake.out")
    service.wakeup.clear()
    (control / "wake.release").touch()
    await asyncio.wait_for(service.wakeup.wait(), HANG_GUARD)
    ended = (await service.poll()).ended
    assert [(e.trial_id, e.status) for e in ended] == [("wake", TrialStatus.SUCCEEDED)]


async def test_adopted_trial_exit_wakes_the_manager(context_for, service, dirs) -> None:
    code, control = dirs
    handle = (await service.submit(spec("adopt", held_command(control, "adopt"), code))).handle
    await wait_for_file(control / "adopt.out")
    await service.close(kill_trials=False)
    other = LocalTrainingService(context_for())
    await other.start()
    try:
        await other.adopt("adopt", handle, {})
        assert (await other.poll()).ended == []
        other.wakeup.clear()
        (control / "adopt.release").touch()
        await asyncio.wait_for(other.wakeup.wait(), HANG_GUARD)
        assert [e.status for e in (await other.poll()).ended] == [TrialStatus.SUCCEEDED]
    finally:
        await other.close(kill_trials=True)


async def test_keeper_killed_alone_is_lost_and_its_trial_stopped(service, dirs) -> None:
    code, control = dirs
    handle = (await service.submit(spec("orphan", held_command(control, "orphan"), code))).handle
    await wait_for_file(control / "orphan.out")
    # the command may run before its keeper has renamed keeper.json into place
    trial_pid = json.loads(await wait_for_file(Path(handle["trial_dir"]) / "keeper.json"))["pid"]
    os.kill(handle["keeper_pid"], signal.SIGKILL)
    ended: dict[str, TrialEnded] = {}
    await poll_until_ended(service, {"orphan"}, ended)
    assert (ended["orphan"].status, ended["orphan"].failure_kind) == (
        TrialStatus.FAILED,
        FailureKind.INFRASTRUCTURE,
    )
    assert ended["orphan"].message == "lost: the trial keeper disappeared without a final record"
    await wait_until_dead(trial_pid)


async def test_cancel_after_the_keeper_died_still_cancels(service, dirs) -> None:
    code, control = dirs
    handle = (await service.submit(spec("dead", held_command(control, "dead"), code))).handle
    await wait_for_file(control / "dead.out")
    trial_dir = Path(handle["trial_dir"])
    trial_pid = json.loads(await wait_for_file(trial_dir / "keeper.json"))["pid"]
    os.kill(handle["keeper_pid"], signal.SIGKILL)
    await wait_until_dead(handle["keeper_pid"])
    await service.cancel("dead")
    ended: dict[str, TrialEnded] = {}
    await poll_until_ended(service, {"dead"}, ended)
    assert ended["dead"].status == TrialStatus.USER_CANCELED
    assert not alive(trial_pid)
    assert json.loads((trial_dir / "result.json").read_text())["written_by"] == "manager"


async def test_a_command_that_cannot_start_fails_as_infrastructure(service, tmp_path: Path) -> None:
    submitted = await service.submit(spec("nocwd", "true", tmp_path / "no such code dir"))
    ended: dict[str, TrialEnded] = {}
    await poll_until_ended(service, {"nocwd"}, ended)
    assert (ended["nocwd"].status, ended["nocwd"].failure_kind) == (
        TrialStatus.FAILED,
        FailureKind.INFRASTRUCTURE,
    )
    assert ended["nocwd"].message is not None and ended["nocwd"].message.startswith("could not start")
    stderr = await service.read_trial_file("nocwd", submitted.handle, "stderr")
    assert b"could not start the trial command" in stderr


async def test_read_file_refuses_a_symlink_out_of_the_trial_dir(service, dirs, tmp_path: Path) -> None:
    code, _ = dirs
    handle = (await service.submit(spec("link", "true", code))).handle
    await poll_until_ended(service, {"link"}, {})
    (tmp_path / "secret").write_text("secret")
    (Path(handle["trial_dir"]) / "escape").symlink_to(tmp_path / "secret")
    with pytest.raises(ValueError):
        await service.read_trial_file("link", handle, "escape")


def test_command_json_holds_only_what_trialfleet_changes_in_the_workers_environment() -> None:
    inherited = {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "SDK_PROCESS": "dispatcher",
        "NNI_EXP_ID": "e",
    }
    env = {"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "secret", "NNI_EXP_ID": "e", "CUDA_VISIBLE_DEVICES": "0"}
    env |= {"MY_VAR": "1", "SAME": "s"}
    overlay, unset = environment_change(env, {**inherited, "SAME": "s"}, keep=["MY_VAR"])
    # NNI's and the GPU variables always (a re-adopting manager reads them), the spec's, and what differs
    assert overlay == {"NNI_EXP_ID": "e", "CUDA_VISIBLE_DEVICES": "0", "MY_VAR": "1"}
    assert unset == ["SDK_PROCESS"]


@pytest.mark.slow
async def test_a_keeper_that_ends_while_its_trial_is_looked_at_is_not_taken_for_lost(service, dirs) -> None:
    """The look reads the keeper alive and no result.json; the keeper then writes its record and exits before
    the look is judged. The trial succeeded and must be told so, not reported lost (its record is there)."""
    code, control = dirs
    handle = (await service.submit(spec("race", held_command(control, "race"), code))).handle
    await wait_for_file(control / "race.out")
    look_one = service.files.look_one

    def look_then_the_keeper_ends(trial):  # type: ignore[no-untyped-def]
        look = look_one(trial)
        assert look.alive and look.result is None
        (control / "race.release").touch()
        deadline = time.monotonic() + HANG_GUARD
        while alive(handle["keeper_pid"]):
            assert time.monotonic() < deadline, "stuck: the keeper did not end"
            time.sleep(0.01)
        service.files.look_one = look_one  # the one stale look only
        return look

    service.files.look_one = look_then_the_keeper_ends
    ended: dict[str, TrialEnded] = {}
    await poll_until_ended(service, {"race"}, ended)
    assert (ended["race"].status, ended["race"].message) == (TrialStatus.SUCCEEDED, "exit code 0")
