"""The manager loop over the real store and the real local platform, driven step by step."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from trialfleet.config import ExperimentConfig
from trialfleet.errors import AlgorithmError
from trialfleet.manager.clock import ManualClock
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import ExperimentStatus, TrialStatus

STEP_LIMIT = 2000  # loop iterations before a wait is declared stuck (a failure message, not a timing)

QUICK_TRIAL = "import nni; p = nni.get_next_parameter(); nni.report_final_result(p['x'])"
SLEEPY_TRIAL = "import time, nni; p = nni.get_next_parameter(); time.sleep(600)"

CRASHING_TUNER = """
from nni.tuner import Tuner

class Crashing(Tuner):
    def __init__(self):
        self.calls = 0
    def update_search_space(self, space):
        pass
    def generate_parameters(self, parameter_id, **kwargs):
        self.calls += 1
        if self.calls > 2:
            raise RuntimeError("the tuner's model blew up")
        return {"x": self.calls}
    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        pass
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))


def make_manager(
    tmp_path: Path, trial_source: str, clock: ManualClock | None = None, **fields: Any
) -> ExperimentManager:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(trial_source)
    settings: dict[str, Any] = {
        "trial_command": f"{sys.executable} trial.py",
        "trial_code_directory": str(code),
        "trial_concurrency": 2,
        "max_trial_number": 4,
        "search_space": {"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6]}},
        "tuner": {"name": "GridSearch"},
        "experiment_working_directory": str(tmp_path / "exps"),
    }
    settings.update(fields)
    _, experiment_dir = create_experiment(ExperimentConfig.for_platform("local", **settings))
    return ExperimentManager(experiment_dir, clock=clock)


async def drive(manager: ExperimentManager, until: Callable[[], bool]) -> None:
    for _ in range(STEP_LIMIT):
        await manager.step()
        if until():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(
        f"condition not reached; status {manager.status}, trials {manager.store.trial_counts()}"
    )


@pytest.fixture
async def stopper() -> AsyncIterator[list[ExperimentManager]]:
    managers: list[ExperimentManager] = []
    yield managers
    for manager in managers:
        if manager.service is not None and manager.status is not ExperimentStatus.STOPPED:
            manager.request_stop()
            await manager.run()


async def keeper_record(manager: ExperimentManager, trial_id: str) -> dict[str, Any]:
    path = Path(manager.store.trial(trial_id).handle["trial_dir"]) / "keeper.json"  # type: ignore[index]
    await drive(manager, path.exists)
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
async def test_runs_to_done_within_concurrency(tmp_path: Path, stopper: list[ExperimentManager]) -> None:
    manager = make_manager(tmp_path, QUICK_TRIAL)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    trials = manager.store.trials()
    assert [t.status for t in trials] == [TrialStatus.SUCCEEDED] * 4
    assert sorted(json.loads(t.final_data or "null") for t in trials) == [
        1,
        2,
        3,
        4,
    ]  # GridSearch, no repeats
    running, peak = 0, 0
    for event in manager.store.events():
        running += {"RUNNING": 1, "SUCCEEDED": -1}.get(event.event, 0)
        peak = max(peak, running)
    assert peak == 2


@pytest.mark.slow
async def test_crashing_custom_tuner_puts_experiment_in_error_and_manager_lives(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    algo_dir = tmp_path / "algo"
    algo_dir.mkdir()
    (algo_dir / "crashing.py").write_text(CRASHING_TUNER)
    manager = make_manager(
        tmp_path, QUICK_TRIAL, tuner={"class_name": "crashing.Crashing", "code_directory": str(algo_dir)}
    )
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.status is ExperimentStatus.ERROR)
    assert manager.error is not None and "the tuner's model blew up" in manager.error
    assert "Traceback" in manager.error
    stored = manager.store.experiment()
    assert stored.status is ExperimentStatus.ERROR and stored.error == manager.error
    await drive(manager, lambda: not manager.store.trial_counts().get(TrialStatus.RUNNING))
    assert manager.store.trial_counts() == {TrialStatus.SUCCEEDED: 2}  # the trials it did propose still ran


async def test_a_tuner_that_cannot_be_built_closes_the_platform_started_beside_it(tmp_path: Path) -> None:
    """The platform prepares while the tuner is built: when the tuner's constructor fails, its error is the one
    raised, and what the platform opened meanwhile (the local keeper spawner's process) is gone."""
    algo_dir = tmp_path / "algo"
    algo_dir.mkdir()
    (algo_dir / "refusing.py").write_text(
        "from nni.tuner import Tuner\n"
        "class Refusing(Tuner):\n"
        "    def __init__(self):\n"
        "        raise ValueError('no model for this search space')\n"
    )
    manager = make_manager(
        tmp_path, QUICK_TRIAL, tuner={"class_name": "refusing.Refusing", "code_directory": str(algo_dir)}
    )
    trials_dir = str(manager.experiment_dir / "trials")
    with pytest.raises(AlgorithmError, match="no model for this search space"):
        await manager.start()
    assert manager.platforms is None and manager.service is None
    assert spawners_of(trials_dir) == []
    assert manager.store.trials() == []


def spawners_of(trials_dir: str) -> list[int]:
    """The live keeper spawners started for this trials directory."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            any(a.endswith(b"spawner.py") for a in argv)
            and trials_dir.encode() in argv
            and pid_alive(int(proc.name))
        ):
            found.append(int(proc.name))
    return found


async def test_an_error_in_the_loop_ends_the_manager_in_error_and_leaves_the_trials_to_a_resume(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    manager = make_manager(tmp_path, SLEEPY_TRIAL, max_trial_number=2)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 2)
    pids = [(await keeper_record(manager, t.id))["pid"] for t in manager.store.trials()]

    async def broken_poll() -> None:
        raise RuntimeError("a bug in the loop")

    assert manager.service is not None
    manager.service.poll = broken_poll  # type: ignore[assignment,method-assign]
    try:
        assert await manager.run() is ExperimentStatus.ERROR
        stored = manager.store.experiment()
        assert (stored.status, stored.error) == (
            ExperimentStatus.ERROR,
            "the manager failed: RuntimeError: a bug in the loop",
        )
        assert all(pid_alive(pid) for pid in pids)  # as after a crash: a resume re-adopts them
    except BaseException:
        for pid in filter(pid_alive, pids):  # no resume will end them
            os.kill(pid, signal.SIGKILL)
        raise

    resumed = ExperimentManager(manager.experiment_dir)
    stopper.append(resumed)
    await resumed.start(resume=True)
    assert resumed.store.experiment().error is None and resumed.status is ExperimentStatus.RUNNING
    running = resumed.store.trials(status=TrialStatus.RUNNING)
    assert len(running) == 2 and {t.attempt for t in running} == {0}


async def test_max_trial_duration_stops_trial_as_early_stopped(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    clock = ManualClock(start=__import__("time").time())
    manager = make_manager(tmp_path, SLEEPY_TRIAL, clock=clock, max_trial_number=1, max_trial_duration=30)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 1)
    pid = (await keeper_record(manager, manager.store.trials()[0].id))["pid"]
    clock.advance(31)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    trial = manager.store.trials()[0]
    assert trial.status is TrialStatus.EARLY_STOPPED
    assert not pid_alive(pid)


async def test_the_duration_is_kept_while_running_and_nothing_is_written_once_done(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    """Once DONE the loop goes on (its server answers) but commits nothing more: every commit makes the REST
    server's kept bodies stale, and the duration, written once a second whether it moved or not, had the
    whole lists of 10,000 trials built again every second for nothing."""
    clock = ManualClock(start=time.time())
    manager = make_manager(tmp_path, SLEEPY_TRIAL, clock=clock, max_trial_number=1, max_trial_duration=30)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 1)
    clock.advance(5)
    await manager.step()
    assert manager.store.experiment().exec_duration >= 5  # written while it moves
    clock.advance(26)  # past maxTrialDuration: the trial is stopped and the experiment is done
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    watch = sqlite3.connect(manager.store.path)
    try:
        before = watch.execute("PRAGMA data_version").fetchone()[0]
        for _ in range(5):
            clock.advance(2)
            await manager.step()
        assert watch.execute("PRAGMA data_version").fetchone()[0] == before
    finally:
        watch.close()
    assert manager.store.experiment().exec_duration == pytest.approx(manager.exec_duration)


@pytest.mark.slow
async def test_max_experiment_duration_ends_submission(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    clock = ManualClock()
    manager = make_manager(
        tmp_path,
        QUICK_TRIAL,
        clock=clock,
        max_trial_number=None,
        max_experiment_duration=60,
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
        tuner={"name": "Random"},
    )
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: len(manager.store.trials()) >= 2)
    clock.advance(61)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    count = len(manager.store.trials())
    for _ in range(5):
        await manager.step()
    assert len(manager.store.trials()) == count


@pytest.mark.slow
async def test_stop_kills_everything_and_resume_continues_the_search(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    manager = make_manager(tmp_path, SLEEPY_TRIAL, max_trial_number=3)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 2)
    pids = [
        (await keeper_record(manager, t.id))["pid"] for t in manager.store.trials(status=TrialStatus.RUNNING)
    ]
    manager.request_stop()
    assert await manager.run() is ExperimentStatus.STOPPED
    assert not any(pid_alive(pid) for pid in pids)
    stopped = manager.store.trials()
    assert {t.status for t in stopped} == {TrialStatus.SYS_CANCELED}
    first_params = {t.id: t.hyper_parameters for t in stopped}

    resumed = ExperimentManager(manager.experiment_dir)
    stopper.append(resumed)
    await resumed.start(resume=True)
    await drive(resumed, lambda: resumed.store.trial_counts().get(TrialStatus.RUNNING) == 2)
    trials = resumed.store.trials()
    assert len(trials) == 2
    assert all(t.attempt == 1 and t.hyper_parameters == first_params[t.id] for t in trials)
    proposed = {params["x"] for params in first_params.values()}
    next_point = resumed.driver.tuner.generate_parameters(99)  # type: ignore[union-attr]
    assert next_point["x"] not in proposed, "the resumed GridSearch would propose a point again"


async def test_lost_trial_is_retried_under_the_retry_policy(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    manager = make_manager(tmp_path, SLEEPY_TRIAL, max_trial_number=1, max_trial_retries=1)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 1)
    trial = manager.store.trials()[0]
    keeper = await keeper_record(manager, trial.id)
    os.kill(keeper["keeper_pid"], signal.SIGKILL)  # as if the machine lost the trial: no final record
    os.killpg(keeper["pgid"], signal.SIGKILL)
    await drive(
        manager,
        lambda: (
            manager.store.trials()[0].attempt == 1 and manager.store.trials()[0].status is TrialStatus.RUNNING
        ),
    )
    attempts = manager.store.attempts(trial.id)
    assert attempts[0]["status"] == "FAILED" and attempts[0]["failure_kind"] == "infrastructure"
    assert "lost" in attempts[0]["message"]


@pytest.mark.slow
async def test_commands_cancel_customize_and_update(tmp_path: Path, stopper: list[ExperimentManager]) -> None:
    manager = make_manager(tmp_path, SLEEPY_TRIAL, max_trial_number=10, trial_concurrency=1)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 1)
    first = manager.store.trials()[0]
    await manager.update_config(trial_concurrency=2)
    seq = await manager.add_customized_trial({"x": 6})
    await drive(manager, lambda: manager.store.trial_counts().get(TrialStatus.RUNNING) == 2)
    custom = next(t for t in manager.store.trials() if t.sequence_id == seq)
    assert custom.parameter_source == "customized" and custom.hyper_parameters == {"x": 6}
    assert manager.store.experiment().config["trialConcurrency"] == 2
    await manager.cancel_trial(first.id)
    await drive(manager, lambda: manager.store.trial(first.id).status is TrialStatus.USER_CANCELED)


CURVE_TRIAL = """
import nni
p = nni.get_next_parameter()
for step in range(3):
    nni.report_intermediate_result(p["x"] * (step + 1))
nni.report_final_result(p["x"])
"""


@pytest.mark.slow
async def test_resume_restores_the_assessor_with_earlier_curves(
    tmp_path: Path, stopper: list[ExperimentManager]
) -> None:
    manager = make_manager(
        tmp_path,
        CURVE_TRIAL,
        max_trial_number=2,
        assessor={"name": "Medianstop", "class_args": {"optimize_mode": "maximize", "start_step": 1}},
    )
    await manager.start()
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    manager.request_stop()
    await manager.run()

    resumed = ExperimentManager(manager.experiment_dir)
    stopper.append(resumed)
    await resumed.start(resume=True)
    # what the resumed assessor knows decides: a curve below both earlier trials' running averages is stopped
    low = await asyncio.get_running_loop().run_in_executor(
        None, resumed.driver.assessor.assess_trial, "new", [0.0]
    )
    high = await asyncio.get_running_loop().run_in_executor(
        None, resumed.driver.assessor.assess_trial, "new2", [99.0]
    )
    assert (bool(low.value), bool(high.value)) == (False, True)
