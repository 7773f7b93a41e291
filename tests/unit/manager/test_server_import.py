"""The manager imports its web server (FastAPI, ~0.2 s of CPU) in a thread beside a light platform preparation
(``local``), once the tuner is built, and only once a heavy preparation is done: a remote fleet's imports
asyncssh and makes SSH handshakes in the manager's process, and it is on the way to the first trial while the
server is not; so is the tuner (Optuna's import, for TPE)."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path
from typing import Any

import pytest

from tests.unit.server.conftest import API, make_config
from tests.unit.server.test_keep_alive import free_port, stop
from trialfleet.config import ExperimentConfig
from trialfleet.manager import process
from trialfleet.manager.driver import AlgorithmDriver
from trialfleet.manager.launcher import bind_socket, create_experiment
from trialfleet.server import load_app
from trialfleet.training_services.local.service import LocalTrainingService
from trialfleet.training_services.remote.service import RemoteTrainingService


def check_status(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", f"{API}/check-status")
        assert connection.getresponse().status == 200
    finally:
        connection.close()


@pytest.mark.parametrize("light", [True, False])
@pytest.mark.slow
async def test_the_web_server_is_imported_beside_a_light_preparation_once_the_tuner_is_built_and_after_a_heavy_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, light: bool
) -> None:
    seen: list[str] = []

    def load_server() -> Any:
        seen.append("server import")
        return load_app()

    monkeypatch.setattr(LocalTrainingService, "light_preparation", light)
    prepare_local = LocalTrainingService._prepare

    async def prepare(self: LocalTrainingService) -> None:
        seen.append("prepare")
        await asyncio.sleep(0.5)  # a preparation that outlasts the tuner's
        await prepare_local(self)
        seen.append("prepared")

    monkeypatch.setattr(LocalTrainingService, "_prepare", prepare)
    start_driver = AlgorithmDriver.start

    async def start_tuner(self: AlgorithmDriver, *args: Any) -> None:
        await start_driver(self, *args)
        seen.append("tuner built")

    monkeypatch.setattr(AlgorithmDriver, "start", start_tuner)
    _, experiment_dir = create_experiment(make_config(tmp_path, max_trial_number=1))
    sock = bind_socket(free_port(), "127.0.0.1")
    port = sock.getsockname()[1]
    manager = asyncio.create_task(process.serve(experiment_dir, "create", sock, load_app=load_server))
    try:
        await asyncio.to_thread(check_status, port)
    finally:
        await asyncio.to_thread(stop, port)
        assert await asyncio.wait_for(manager, 60) == 0
    if light:
        assert seen[:4] == ["prepare", "tuner built", "server import", "prepared"]
    else:
        assert seen[:4] == ["prepare", "tuner built", "prepared", "server import"]


def test_an_experiment_with_any_heavy_platform_imports_its_server_after_preparing(tmp_path: Path) -> None:
    local = make_config(tmp_path)
    (tmp_path / "key").write_text("unused: nothing connects")
    machine = {"host": "h1", "user": "u", "sshKeyFile": str(tmp_path / "key")}
    fields = local.model_dump(by_alias=True, exclude_none=True, exclude={"training_service"})
    hybrid = ExperimentConfig.from_dict(
        {
            **fields,
            "trainingService": [{"platform": "local"}, {"platform": "remote", "machineList": [machine]}],
        }
    )
    assert LocalTrainingService.light_preparation and not RemoteTrainingService.light_preparation
    assert process._light_preparation(local)
    assert not process._light_preparation(hybrid)
