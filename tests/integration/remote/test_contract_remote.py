"""The training-service contract, run against the remote platform on 3 real sshd hosts."""

from __future__ import annotations

import json
import os
import posixpath
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet
from remote_helpers import remote_context

from trialfleet.testing import (
    TrainingServiceContract,
    wait_until_gone,
)
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

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        return posixpath.join(handle["trial_dir"], "code")  # a remote trial runs in its own copy


class TestRemoteReuseContract(TestRemoteContract):
    """The same suite with ``reuseMode: true``: every call through one long-lived runner per host."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, fleet: Fleet) -> ExperimentContext:
        return remote_context(tmp_path / "experiment 'dir' ü", fleet.hosts, reuse_mode=True)
