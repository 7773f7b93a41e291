"""The manager imports its web server (FastAPI, ~0.2 s of CPU) in a thread beside a light platform preparation
(``local``), and only once a heavy one is done: a remote fleet's preparation imports asyncssh and makes SSH
handshakes in the manager's process, and it is on the way to the first trial while the server is not."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path

import pytest

from tests.unit.server.conftest import API, make_config
from tests.unit.server.test_keep_alive import free_port, stop
from trialfleet.config import ExperimentConfig
from trialfleet.manager import process
from trialfleet.manager.launcher import bind_socket, create_experiment
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
async def test_the_web_server_is_imported_beside_a_light_preparation_and_after_a_heavy_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, light: bool
) -> None:
    seen: list[str] = []
    server_import = process._ServerImport()
    start_import = server_import.start

    def start() -> None:
        seen.append("server import")
        start_import()

    monkeypatch.setattr(server_import, "start", start)
    monkeypatch.setattr(process, "_SERVER_IMPORT", server_import)
    monkeypatch.setattr(LocalTrainingService, "light_preparation", light)
    prepare_local = LocalTrainingService._prepare

    async def prepare(self: LocalTrainingService) -> None:
        seen.append("prepare")
        await prepare_local(self)

    monkeypatch.setattr(LocalTrainingService, "_prepare", prepare)
    _, experiment_dir = create_experiment(make_config(tmp_path, max_trial_number=1))
    sock = bind_socket(free_port(), "127.0.0.1")
    port = sock.getsockname()[1]
    manager = asyncio.create_task(process.serve(experiment_dir, "create", sock))
    try:
        await asyncio.to_thread(check_status, port)
    finally:
        await asyncio.to_thread(stop, port)
        assert await asyncio.wait_for(manager, 60) == 0
    assert seen[:2] == (["server import", "prepare"] if light else ["prepare", "server import"])


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
