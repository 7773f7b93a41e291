"""A platform of a hybrid experiment dies mid-run: its SSH host is blackholed while a trial runs on it.

The manager reports the remote platform unavailable (log, ``PLATFORM_UNAVAILABLE`` event, ``/check-status``),
places no trial there meanwhile, and once the host's grace period is over its trial is lost and re-run on the
local platform under ``maxTrialRetries``; when the host answers again the platform is reported back up.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fleet import Fleet

from trialfleet.config import ExperimentConfig
from trialfleet.manager.platforms import PlatformState
from trialfleet.status import TrialStatus
from trialfleet.testing.running import RunningExperiment

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(600)]

HELD_TRIAL = """
import os, sys, time
import nni

params = nni.get_next_parameter()
while os.path.exists(sys.argv[1]):
    time.sleep(0.1)
nni.report_final_result(params["x"])
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))


async def test_a_dead_remote_platform_is_reported_and_its_trial_is_retried_on_local(
    tmp_path: Path, healed_ssh_host: Fleet
) -> None:
    host = healed_ssh_host.hosts[0]
    code, hold = tmp_path / "code", tmp_path / "hold"
    code.mkdir()
    (code / "trial.py").write_text(HELD_TRIAL)
    hold.touch()
    config = ExperimentConfig.from_dict(
        {
            "searchSpace": {"x": {"_type": "choice", "_value": [1, 2]}},
            "trialCommand": f"python3 trial.py {hold}",
            "trialCodeDirectory": str(code),
            "trialConcurrency": 2,
            "maxTrialNumber": 2,
            "maxTrialRetries": 1,
            "tuner": {"name": "GridSearch"},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": [
                {"platform": "local", "trialCommand": f"{sys.executable} trial.py {hold}"},
                {"platform": "remote", "machineList": [host.machine()], "unreachableGracePeriod": 5},
            ],
        }
    )
    async with RunningExperiment(config) as experiment:
        assert experiment.manager.platforms is not None
        remote = experiment.manager.platforms.by_name["remote"]
        store = experiment.store
        try:

            def running_on() -> list[str | None]:
                return sorted(t.platform for t in store.trials(status=TrialStatus.RUNNING))

            await experiment.until(
                lambda: running_on() == ["local", "remote"], "a trial on each platform", 120
            )
            doomed = next(t for t in store.trials() if t.platform == "remote")
            host.blackhole()
            await experiment.until(
                lambda: remote.state is PlatformState.UNAVAILABLE, "remote reported unavailable", 60
            )
            assert remote.message is not None and remote.message.startswith("no machine is reachable: ")
            (event,) = store.events(event="PLATFORM_UNAVAILABLE")
            assert event.data == {"platform": "remote", "message": remote.message}
            await experiment.until(lambda: store.trial(doomed.id).attempt == 1, "the lost trial re-run", 120)
            await experiment.until(lambda: running_on() == ["local", "local"], "both trials on local", 60)
            lost = store.attempts(doomed.id)[0]
            assert (lost["platform"], lost["status"], lost["failure_kind"]) == (
                "remote",
                "FAILED",
                "infrastructure",
            )
            assert lost["message"].startswith(f"lost: host {host.machine()['user']}@{host.address}")

            host.heal()
            await experiment.until(lambda: remote.state is PlatformState.UP, "remote back up", 120)
            assert [e.event for e in store.events() if e.event.startswith("PLATFORM_")] == [
                "PLATFORM_UNAVAILABLE",
                "PLATFORM_UP",
            ]
            hold.unlink()
            await experiment.done(timeout=120)
        finally:
            hold.unlink(missing_ok=True)
        trials = store.trials()
        assert [(t.status, t.platform) for t in trials] == [(TrialStatus.SUCCEEDED, "local")] * 2
        assert store.trial(doomed.id).attempt == 1
