"""The training-service contract, run against the remote platform on 3 real sshd hosts."""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet
from remote_helpers import remote_context
from training_service_contract import (
    HOSTILE,
    TrainingServiceContract,
    poll_until,
    wait_until_gone,
)

from trialfleet.status import TrialStatus
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.remote import RemoteTrainingService

pytestmark = pytest.mark.ssh


class TestRemoteContract(TrainingServiceContract):
    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return RemoteTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, fleet: Fleet) -> ExperimentContext:
        return remote_context(tmp_path / "experiment 'dir' ü", fleet.hosts)

    @pytest.fixture
    def python_command(self) -> str:
        return "/usr/bin/python3"  # the hosts' own python, where trialfleet is not installed

    @pytest.fixture
    def hard_kill(self, fleet: Fleet) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        async def kill(handle: Mapping[str, Any]) -> None:
            host = fleet.host_of(dict(handle))
            keeper = json.loads(host.local(posixpath.join(handle["trial_dir"], "keeper.json")).read_text())
            os.kill(handle["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([handle["keeper_pid"], keeper["pid"]])

        return kill

    async def test_hostile_values_run_exactly_as_given(  # type: ignore[override]
        self, services, python_command, tmp_path, control
    ) -> None:
        """As in the contract, except that a remote trial runs in its own copy of the code directory."""
        code_dir = tmp_path / "code dir 'q' \"dq\" ; $(touch pwned) `x` ünï\nnl"
        code_dir.mkdir()
        self.script(
            code_dir,
            "echo.py",
            """
            out = {"argv": sys.argv[2:], "cwd": os.getcwd(), "parameters": parameter_record()["parameters"],
                   "env": os.environ["HOSTILE_VALUE"], "code_dir": os.environ["NNI_CODE_DIR"]}
            with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
                json.dump(out, f)
            """,
        )
        hostile_text = "\n".join(HOSTILE)
        command = (
            self.run_command(python_command, "echo.py", control) + " " + " ".join(map(shlex.quote, HOSTILE))
        )
        spec = self.spec(
            "hostile",
            command,
            code_dir,
            {"text": hostile_text, "n": 1.5},
            env={"HOSTILE_VALUE": hostile_text},
        )
        service = await services.start()
        handle = (await self.submit(service, spec)).handle
        seen = await poll_until(service, lambda s: "hostile" in s.ended)
        assert seen.ended["hostile"].status == TrialStatus.SUCCEEDED
        echoed = json.loads(await service.read_trial_file("hostile", handle, "echo.json"))
        assert echoed["argv"] == HOSTILE
        copy = posixpath.join(handle["trial_dir"], "code")
        assert echoed["cwd"] == copy and echoed["code_dir"] == copy
        assert echoed["parameters"] == {"text": hostile_text, "n": 1.5}
        assert echoed["env"] == hostile_text
        assert [p for p in tmp_path.rglob("pwned*")] == []
