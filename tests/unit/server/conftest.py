"""A real experiment (directory, database, manifest) in a temp dir, served by the real app.

``populated``: trials written straight into the store with known values, for exact payload checks.
``running``: a started manager running real local trials (`import nni`) on the test's event loop.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from trialfleet.config import ExperimentConfig
from trialfleet.manager.decisions import parameter_record
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.server.app import create_app
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, NewMetric

T0 = 1_700_000_000.0
API = "/api/v1/nni"

TRIAL_SCRIPT = """
import os, sys, time
import nni

params = nni.get_next_parameter()
print("hello from", nni.get_trial_id())
print("to stderr", file=sys.stderr)
for step in range(2):
    nni.report_intermediate_result(params["x"] * step)
deadline = time.time() + 60
while os.path.exists("hold") and time.time() < deadline:
    time.sleep(0.05)
nni.report_final_result({"default": params["x"], "loss": 1 - params["x"]})
"""


@pytest.fixture(autouse=True)
def trialfleet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TRIALFLEET_HOME", str(home))
    return home


def make_config(tmp_path: Path, **overrides: object) -> ExperimentConfig:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(textwrap.dedent(TRIAL_SCRIPT))
    fields: dict[str, object] = {
        "trial_command": f"{sys.executable} trial.py",
        "trial_code_directory": str(code),
        "trial_concurrency": 2,
        "max_trial_number": 4,
        "search_space": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "tuner": {"name": "Random", "classArgs": {"seed": 1}},
        "experiment_working_directory": str(tmp_path / "experiments"),
    }
    fields.update(overrides)
    return ExperimentConfig.for_platform("local", **fields)


def populate(store: ExperimentStore, trial_dir: Path) -> None:
    """sA SUCCEEDED with a dict final metric, fB FAILED, rC RUNNING with one intermediate result, wD WAITING."""
    store.add_trial("sA", parameter_record(0, {"x": 0.25}), T0)
    store.mark_submitted("sA", {"trial_dir": str(trial_dir)}, f"local:{trial_dir}", T0 + 1, running=True)
    store.add_metrics(
        [
            NewMetric("sA", 0, "PERIODICAL", 0, "0.1", T0 + 2),
            NewMetric("sA", 0, "FINAL", 0, '{"default": 0.25, "loss": 0.75}', T0 + 3, final_value=0.25),
        ],
        {},
    )
    store.end_trial("sA", TrialStatus.SUCCEEDED, T0 + 4, exit_code=0)
    store.add_trial("fB", parameter_record(1, {"x": 0.5}), T0 + 5)
    store.mark_submitted("fB", {"trial_dir": str(trial_dir)}, f"local:{trial_dir}", T0 + 6, running=True)
    store.add_metrics([NewMetric("fB", 1, "FINAL", 0, "0.5", T0 + 6.5, final_value=0.5)], {})
    store.end_trial("fB", TrialStatus.FAILED, T0 + 7, exit_code=3, message="exit code 3")
    store.add_trial("rC", parameter_record(2, {"x": 0.75}), T0 + 8)
    store.mark_submitted("rC", {"trial_dir": str(trial_dir)}, f"local:{trial_dir}", T0 + 9, running=True)
    store.add_metrics([NewMetric("rC", 2, "PERIODICAL", 0, "0.7", T0 + 10)], {})
    store.add_trial("wD", parameter_record(3, {"x": 1.0}), T0 + 11)


@dataclass
class Served:
    manager: ExperimentManager
    experiment_dir: Path


@pytest.fixture
def populated(tmp_path: Path) -> Iterator[tuple[Served, TestClient]]:
    _, experiment_dir = create_experiment(make_config(tmp_path))
    trial_dir = experiment_dir / "trials" / "sA"
    trial_dir.mkdir(parents=True)
    (trial_dir / "trial.stdout").write_text("hello stdout\n")
    (trial_dir / "trial.stderr").write_text("")
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    populate(store, trial_dir)
    store.close()
    manager = ExperimentManager(experiment_dir)
    with TestClient(create_app(manager)) as client:  # its shutdown closes the app's read connections
        yield Served(manager, experiment_dir), client
    manager.store.close()


@pytest.fixture
def viewed(populated: tuple[Served, TestClient]) -> Iterator[tuple[Served, TestClient]]:
    served, _ = populated
    manager = ExperimentManager(served.experiment_dir, readonly=True)
    with TestClient(create_app(manager)) as client:
        yield Served(manager, served.experiment_dir), client
    manager.store.close()


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Served, httpx.AsyncClient]]:
    """The manager runs real trials; a ``hold`` file in the code directory keeps them from finishing."""
    config = make_config(tmp_path)
    (Path(config.training_services[0].trial_code_directory) / "hold").touch()
    _, experiment_dir = create_experiment(config)
    manager = ExperimentManager(experiment_dir)
    await manager.start()
    loop_task = asyncio.create_task(manager.run())
    app = create_app(manager)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        yield Served(manager, experiment_dir), client
    manager.request_stop()
    await asyncio.wait_for(loop_task, 60)
    manager.store.close()


async def wait_for(predicate: object, timeout: float = 30.0) -> None:
    """Poll an async predicate until it holds (trials are real processes)."""
    assert callable(predicate)
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
