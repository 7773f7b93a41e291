"""A hybrid experiment's manager over the real store, with real local training services standing in for each
block's platform (they run real processes; the placement does not care where): trials spread by weight within
each platform's own limits, each stored with its platform, a platform that fails to start or to poll left out
while the others go on, and a resumed manager handing each trial back to the platform that launched it.

The whole thing on real local, remote and Slurm platforms: tests/integration/hybrid."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_experiment_manager import drive, stopper  # noqa: F401 - the fixture is used

from trialfleet.config import ExperimentConfig
from trialfleet.errors import PlatformError
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.manager.platforms import PlatformState
from trialfleet.nni_view.payloads import trial_job_info
from trialfleet.server.app import create_app
from trialfleet.status import ExperimentStatus, TrialStatus
from trialfleet.training_services import LocalConfig, LocalTrainingService
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.events import PollBatch

HELD_TRIAL = (
    "import os, time, nni\np = nni.get_next_parameter()\n"
    "while os.path.exists('hold'): time.sleep(0.02)\nnni.report_final_result(p['x'])\n"
)


class StandIn(LocalTrainingService):
    """The real local service in place of a block's platform; a test may make its start or its poll fail."""

    def __init__(self, context: ExperimentContext) -> None:
        block = context.service_config
        local = LocalConfig(
            trial_command=block.trial_command, trial_code_directory=block.trial_code_directory
        )
        super().__init__(dataclasses.replace(context, service_config=local))
        self.start_error: str | None = None
        self.poll_error: str | None = None

    async def start(self) -> None:
        if self.start_error is not None:
            raise PlatformError(self.start_error)
        await super().start()

    async def poll(self) -> PollBatch:
        if self.poll_error is not None:
            raise OSError(self.poll_error)
        return await super().poll()


class StandIns(dict[str, StandIn]):
    """The services built for a manager, by platform name; ``broken`` start before they exist."""

    def __init__(self, start_errors: dict[str, str] | None = None) -> None:
        super().__init__()
        self.start_errors = start_errors or {}

    def __call__(self, context: ExperimentContext) -> StandIn:
        service = StandIn(context)
        service.start_error = self.start_errors.get(context.service_config.platform)
        self[context.service_config.platform] = service
        return service


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))


def hybrid_experiment(tmp_path: Path, blocks: list[dict[str, Any]], **fields: Any) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(HELD_TRIAL)
    (code / "hold").touch()
    (tmp_path / "key").write_text("unused: the remote block's services are stand-ins")
    machine = {"host": "h1", "user": "u", "sshKeyFile": str(tmp_path / "key")}
    services = [
        {**block, "machineList": [machine]} if block["platform"] == "remote" else dict(block)
        for block in blocks
    ]
    config = {
        "trialCommand": f"{sys.executable} trial.py",
        "trialCodeDirectory": str(code),
        "trialConcurrency": 4,
        "maxTrialNumber": 4,
        "searchSpace": {"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6, 7, 8]}},
        "tuner": {"name": "GridSearch"},
        "experimentWorkingDirectory": str(tmp_path / "exps"),
        "trainingService": services,
        **fields,
    }
    _, experiment_dir = create_experiment(ExperimentConfig.from_dict(config))
    return experiment_dir


@asynccontextmanager
async def rest(manager: ExperimentManager) -> AsyncIterator[httpx.AsyncClient]:
    """NNI's REST API of the manager, on the manager's own loop."""
    app = create_app(manager)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
    ):
        yield client


def running_on(manager: ExperimentManager) -> Counter[str | None]:
    return Counter(t.platform for t in manager.store.trials(status=TrialStatus.RUNNING))


def release(tmp_path: Path) -> None:
    (tmp_path / "code" / "hold").unlink()


@pytest.mark.slow
async def test_trials_spread_by_weight_and_each_is_stored_with_its_platform(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local", "placementWeight": 3}, {"platform": "remote"}]
    services = StandIns()
    manager = ExperimentManager(hybrid_experiment(tmp_path, blocks), service_factory=services)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: sum(running_on(manager).values()) == 4)
    assert running_on(manager) == Counter({"local": 3, "remote": 1})
    for trial in manager.store.trials():
        assert trial.platform is not None and trial.id in services[trial.platform].live
        assert trial_job_info(trial, None)["platform"] == trial.platform  # REST /trial-jobs
        submitted = manager.store.events(trial.id, event="SUBMITTED")
        assert [e.data["platform"] for e in submitted] == [trial.platform]  # type: ignore[index]
    release(tmp_path)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    assert {t.status for t in manager.store.trials()} == {TrialStatus.SUCCEEDED}
    async with rest(manager) as client:
        exported = (await client.get("/api/v1/nni/export-data")).json()
    assert {r["trialJobId"]: r["platform"] for r in exported} == {
        t.id: t.platform for t in manager.store.trials()
    }


@pytest.mark.slow
async def test_a_platform_at_its_own_trial_concurrency_leaves_the_rest_to_the_others(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local", "trialConcurrency": 1, "placementWeight": 10}, {"platform": "remote"}]
    manager = ExperimentManager(
        hybrid_experiment(tmp_path, blocks, trialConcurrency=3, maxTrialNumber=3), service_factory=StandIns()
    )
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: sum(running_on(manager).values()) == 3)
    assert running_on(manager) == Counter({"local": 1, "remote": 2})
    release(tmp_path)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)


@pytest.mark.slow
async def test_a_platform_whose_poll_fails_leaves_and_its_trials_are_retried_on_the_others(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local"}, {"platform": "remote"}]
    services = StandIns()
    experiment_dir = hybrid_experiment(
        tmp_path, blocks, trialConcurrency=2, maxTrialNumber=2, maxTrialRetries=1
    )
    manager = ExperimentManager(experiment_dir, service_factory=services)
    stopper.append(manager)
    await manager.start()
    await drive(manager, lambda: running_on(manager) == Counter({"local": 1, "remote": 1}))
    on_remote = next(t for t in manager.store.trials() if t.platform == "remote")
    services["remote"].poll_error = "the cluster's API went away"
    await drive(manager, lambda: running_on(manager) == Counter({"local": 2}))
    assert manager.platforms is not None
    remote = manager.platforms.by_name["remote"]
    assert remote.state is PlatformState.FAILED and "the cluster's API went away" in (remote.message or "")
    (event,) = manager.store.events(event="PLATFORM_FAILED")
    assert event.data == {"platform": "remote", "message": remote.message}
    retried = manager.store.trial(on_remote.id)
    assert (retried.attempt, retried.platform) == (1, "local")
    first = manager.store.attempts(on_remote.id)[0]
    assert (first["platform"], first["status"], first["failure_kind"]) == (
        "remote",
        "FAILED",
        "infrastructure",
    )
    assert "lost: platform remote failed" in first["message"]
    release(tmp_path)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    assert {t.status for t in manager.store.trials()} == {TrialStatus.SUCCEEDED}


@pytest.mark.slow
async def test_a_platform_that_cannot_start_is_reported_and_the_others_go_on(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local"}, {"platform": "remote"}]
    services = StandIns({"remote": "remote: 1 of 1 machine(s) cannot be used:\n  - u@h1:22: refused"})
    manager = ExperimentManager(
        hybrid_experiment(tmp_path, blocks, trialConcurrency=2), service_factory=services
    )
    stopper.append(manager)
    await manager.start()
    assert manager.platforms is not None
    assert manager.platforms.status() == [
        {"platform": "local", "status": "UP", "trials": 0},
        {
            "platform": "remote",
            "status": "FAILED",
            "trials": 0,
            "message": "it did not start: remote: 1 of 1 machine(s) cannot be used:\n  - u@h1:22: refused",
        },
    ]
    await drive(manager, lambda: running_on(manager) == Counter({"local": 2}))
    async with rest(manager) as client:
        status = (await client.get("/api/v1/nni/check-status")).json()
        jobs = (await client.get("/api/v1/nni/trial-jobs")).json()
    assert status == {"status": "RUNNING", "errors": [], "platforms": manager.platforms.status()}
    assert [job["platform"] for job in jobs] == ["local", "local"]
    release(tmp_path)
    await drive(manager, lambda: manager.status is ExperimentStatus.DONE)
    assert {t.platform for t in manager.store.trials()} == {"local"}


async def test_no_platform_starting_is_the_experiment_s_error(tmp_path: Path) -> None:
    blocks = [{"platform": "local"}, {"platform": "remote"}]
    services = StandIns({"local": "local: no keeper", "remote": "remote: no host"})
    manager = ExperimentManager(hybrid_experiment(tmp_path, blocks), service_factory=services)
    with pytest.raises(PlatformError) as caught:
        await manager.start()
    assert str(caught.value) == (
        "no platform of this hybrid experiment started:\n"
        "  - local: it did not start: local: no keeper\n"
        "  - remote: it did not start: remote: no host"
    )


@pytest.mark.slow
async def test_a_resumed_manager_hands_each_trial_back_to_the_platform_that_launched_it(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local"}, {"platform": "remote"}]
    experiment_dir = hybrid_experiment(tmp_path, blocks)
    first = ExperimentManager(experiment_dir, service_factory=StandIns())
    await first.start()
    await drive(first, lambda: running_on(first) == Counter({"local": 2, "remote": 2}))
    assert first.platforms is not None
    await first.platforms.close(kill_trials=False)  # the manager is gone; its trials run on
    first.store.close()

    services = StandIns()
    resumed = ExperimentManager(experiment_dir, service_factory=services)
    stopper.append(resumed)
    await resumed.start(resume=True)
    for trial in resumed.store.trials():
        assert list(services[trial.platform or ""].live).count(trial.id) == 1
        assert all(trial.id not in s.live for name, s in services.items() if name != trial.platform)
    release(tmp_path)
    await drive(resumed, lambda: resumed.status is ExperimentStatus.DONE)
    trials = resumed.store.trials()
    assert [(t.status, t.attempt) for t in trials] == [(TrialStatus.SUCCEEDED, 0)] * 4
    assert Counter(t.platform for t in trials) == Counter({"local": 2, "remote": 2})


@pytest.mark.slow
async def test_trials_of_a_platform_that_does_not_start_on_resume_are_lost_and_retried_on_the_others(
    tmp_path: Path,
    stopper: list[ExperimentManager],  # noqa: F811
) -> None:
    blocks = [{"platform": "local"}, {"platform": "remote"}]
    experiment_dir = hybrid_experiment(
        tmp_path, blocks, trialConcurrency=2, maxTrialNumber=2, maxTrialRetries=1
    )
    first = ExperimentManager(experiment_dir, service_factory=StandIns())
    await first.start()
    await drive(first, lambda: running_on(first) == Counter({"local": 1, "remote": 1}))
    on_remote = next(t for t in first.store.trials() if t.platform == "remote")
    assert first.platforms is not None
    await first.platforms.close(kill_trials=False)
    first.store.close()

    resumed = ExperimentManager(experiment_dir, service_factory=StandIns({"remote": "remote: no host"}))
    stopper.append(resumed)
    await resumed.start(resume=True)
    await drive(resumed, lambda: running_on(resumed) == Counter({"local": 2}))
    first_attempt = resumed.store.attempts(on_remote.id)[0]
    assert (first_attempt["platform"], first_attempt["failure_kind"]) == ("remote", "infrastructure")
    assert first_attempt["message"] == "lost: platform remote failed: it did not start: remote: no host"
    release(tmp_path)
    await drive(resumed, lambda: resumed.status is ExperimentStatus.DONE)
    assert {t.status for t in resumed.store.trials()} == {TrialStatus.SUCCEEDED}
