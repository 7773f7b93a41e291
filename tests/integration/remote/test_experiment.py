"""Whole experiments on the remote platform through the real manager, and the config forms that reach it."""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet import Fleet

from trialfleet import RemoteConfig
from trialfleet.config.loader import load_config
from trialfleet.errors import PlatformError
from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.manager.launcher import create_experiment
from trialfleet.status import TrialStatus
from trialfleet.testing.running import RunningExperiment

pytestmark = pytest.mark.ssh

TRIALS = 12
CONCURRENCY = 6
TRIAL_SCRIPT = """
import json, os, time
import nni

params = nni.get_next_parameter()
sent = open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "sent.log"), "a")
for i in range(5):
    value = params["x"] * 10 + i
    nni.report_intermediate_result(value)
    sent.write(json.dumps(value) + "\\n"); sent.flush()
    time.sleep(0.1)
nni.report_final_result(params["x"])
"""


def write_config(tmp_path: Path, machine_list: list[dict[str, Any]], **extra: Any) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(TRIAL_SCRIPT)
    config = {
        "experimentName": "remote fleet",
        "searchSpace": {"x": {"_type": "randint", "_value": [0, 1_000_000]}},
        "trialCommand": "python3 trial.py",
        "trialCodeDirectory": "code",
        "trialConcurrency": CONCURRENCY,
        "maxTrialNumber": TRIALS,
        "tuner": {"name": "Random", "classArgs": {"seed": 5}},
        "experimentWorkingDirectory": str(tmp_path / "experiments"),
        "trainingService": {
            "platform": "remote",
            "unreachableGracePeriod": 30,
            "machineList": machine_list,
            **extra,
        },
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(autouse=True)
def private_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))


async def test_experiment_on_three_hosts_runs_to_completion(tmp_path: Path, fleet: Fleet) -> None:
    config = load_config(write_config(tmp_path, [h.machine() for h in fleet.hosts])).config
    async with RunningExperiment(config) as experiment:
        await experiment.done(timeout=240)
        trials = experiment.store.trials()
        assert len(trials) == TRIALS
        hosts = Counter(trial.handle["machine"] for trial in trials if trial.handle)
        assert sorted(hosts) == sorted(f"root@{h.address}:22" for h in fleet.hosts), hosts
        for trial in trials:
            assert trial.status is TrialStatus.SUCCEEDED, (trial.id, trial.status, trial.message)
            host = fleet.host_of(dict(trial.handle))
            sent_log = host.local(posixpath.join(trial.handle["trial_dir"], "sent.log"))
            sent = [json.loads(line) for line in sent_log.read_text().splitlines()]
            stored = experiment.store.metrics(trial.id, type="PERIODICAL")
            assert [json.loads(m.data) for m in stored] == sent, (
                f"trial {trial.id}: stored metrics differ from sent"
            )
            assert [json.loads(m.data) for m in experiment.store.metrics(trial.id, type="FINAL")] == [
                trial.hyper_parameters["x"]
            ]
    for trial in trials:  # the manager stopped: it copied the ended trials' logs back before
        assert (experiment.experiment_dir / "trials" / trial.id / "result.json").exists(), (
            "logs are copied back"
        )


async def test_experiment_with_a_wrong_host_does_not_start(tmp_path: Path, fleet: Fleet) -> None:
    machine_list = [h.machine() for h in fleet.hosts[1:]] + [
        fleet.hosts[0].machine(sshKeyFile=str(fleet.wrong_key))
    ]
    config = load_config(write_config(tmp_path, machine_list)).config
    _, experiment_dir = create_experiment(config)
    manager = ExperimentManager(experiment_dir)
    with pytest.raises(PlatformError, match=f"root@{fleet.hosts[0].address}:22: authentication failed"):
        await manager.start()
    assert manager.store.trials() == []


def test_v1_machine_list_is_converted_and_secrets_stay_hidden(tmp_path: Path, fleet: Fleet) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "search_space.json").write_text('{"x": {"_type": "choice", "_value": [1, 2]}}')
    v1 = {
        "authorName": "a",
        "experimentName": "v1 remote",
        "trialConcurrency": 2,
        "maxTrialNum": 4,
        "trainingServicePlatform": "remote",
        "searchSpacePath": "search_space.json",
        "tuner": {"builtinTunerName": "Random"},
        "trial": {"command": "python3 trial.py", "codeDir": "code", "gpuNum": 0},
        "remoteConfig": {"reuse": False},
        "machineList": [
            {"ip": fleet.hosts[0].address, "username": "root", "sshKeyPath": str(fleet.client_key)},
            {"ip": fleet.hosts[1].address, "port": 22, "username": "bob", "passwd": "hunter2-secret"},
        ],
    }
    path = tmp_path / "v1.yml"
    path.write_text(yaml.safe_dump(v1))
    loaded = load_config(path)
    assert loaded.converted_from_v1
    service = loaded.config.training_service
    assert isinstance(service, RemoteConfig) and service.reuse_mode is False
    first, second = service.machine_list
    assert (first.host, first.user, first.ssh_key_file) == (fleet.hosts[0].address, "root", fleet.client_key)
    assert second.password is not None and second.password.get_secret_value() == "hunter2-secret"
    assert second.ssh_key_file is None
    shown = json.dumps(loaded.config.to_json())
    assert "hunter2-secret" not in shown and "hunter2-secret" not in repr(loaded.config)


def test_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "remote" / "config.yml"
    config = load_config(example).config.training_service
    assert isinstance(config, RemoteConfig) and len(config.machine_list) == 3
