"""NNI's own OpenPAI configs, v2 and v1, run by the real ``trialfleet create --foreground`` against an emulated
cluster that the test starts, laid out as NNI's documents describe it: a storage named ``confignfs-data`` that jobs
see at ``/mnt/confignfs-data`` and the manager's machine mounts at ``localStorageMountPoint``.

The configs are the documents' examples as written. A user fills in what the documents leave to them — the
cluster's address, the user name and token, where the storage is mounted here, the code directory — and so does
the test; it also lowers the trial count and puts the experiment directory in the test's directory. The v1 example
(``PaiMode.md``) used ``mnist-annotation`` with ``useAnnotation: true``, which NNI itself no longer runs (v3.0
dropped annotations); it runs here with ``useAnnotation: false`` and a trial that calls ``nni`` directly.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpai_helpers import FAST

from tests.emulators.openpai import ClusterConfig, OpenPAIEmulator, Storage, Timing, User, VirtualCluster
from tests.integration.cli_harness import Cli, free_port
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore

pytestmark = pytest.mark.slow

# NNI's docs/en_US/TrainingService/PaiMode.rst (v2): "..." in the document stands for the rest of the experiment
V2_CONFIG = """\
searchSpaceFile: search_space.json
trialCommand: python3 mnist.py
trialCodeDirectory: {code}
tuner:
  name: TPE
  classArgs:
    optimize_mode: maximize
maxTrialNumber: 3
experimentWorkingDirectory: {experiments}
trialGpuNumber: 0
trialConcurrency: 1
trainingService:
  platform: openpai
  host: {host}
  username: alice
  token: {token}
  dockerImage: msranni/nni
  trialCpuNumber: 1
  trialMemorySize: 8GB
  storageConfigName: confignfs-data
  localStorageMountPoint: {mount}
  containerStorageMountPoint: /mnt/confignfs-data
"""

# NNI's docs/en_US/TrainingService/PaiMode.md (v1)
V1_CONFIG = """\
authorName: your_name
experimentName: auto_mnist
# how many trials could be concurrently running
trialConcurrency: 2
# maximum experiment running duration
maxExecDuration: 3h
# empty means never stop
maxTrialNum: 4
# choice: local, remote, pai
trainingServicePlatform: pai
# search space file
searchSpacePath: search_space.json
# choice: true, false
useAnnotation: false
logDir: {experiments}
tuner:
  builtinTunerName: TPE
  classArgs:
    optimize_mode: maximize
trial:
  command: python3 mnist.py
  codeDir: {code}
  gpuNum: 0
  cpuNum: 1
  memoryMB: 8196
  image: msranni/nni:latest
  virtualCluster: default
  nniManagerNFSMountPath: {mount}
  containerNFSMountPath: /mnt/confignfs-data
  paiStorageConfigName: confignfs-data
# Configuration to access OpenPAI Cluster
paiConfig:
  userName: your_pai_nni_user
  token: {token}
  host: {host}
  reuse: true
"""

MNIST = """\
import nni

params = nni.get_next_parameter()
accuracy = 0.0
for epoch in range(3):
    accuracy = params["lr"] * (epoch + 1) + params["momentum"] / 10
    nni.report_intermediate_result(accuracy)
nni.report_final_result(accuracy)
"""
SEARCH_SPACE = {
    "lr": {"_type": "choice", "_value": [0.0001, 0.001, 0.01, 0.1]},
    "momentum": {"_type": "uniform", "_value": [0, 1]},
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[OpenPAIEmulator]:
    """The storage ``confignfs-data`` is ``tmp_path/mnt``: there the manager's machine "mounts" it."""
    (tmp_path / "mnt").mkdir()
    config = ClusterConfig(
        users=[User("admin", admin=True), User("alice"), User("your_pai_nni_user")],
        virtual_clusters=[VirtualCluster("default")],
        storages=[Storage("confignfs-data", tmp_path / "mnt")],
        timing=Timing(delays=dict(FAST)),
    )
    with OpenPAIEmulator(config, workdir=tmp_path / "cluster") as emulator:
        yield emulator


def write_config(tmp_path: Path, template: str, host: str, token: str) -> Path:
    code = tmp_path / "mnist"
    code.mkdir()
    (code / "mnist.py").write_text(MNIST)
    (tmp_path / "search_space.json").write_text(json.dumps(SEARCH_SPACE))
    config = tmp_path / "config.yml"
    values = {"code": code, "experiments": tmp_path / "experiments", "mount": tmp_path / "mnt"}
    config.write_text(template.format(host=host, token=token, **values))
    return config


def run(tmp_path: Path, config: Path, port: int | None = None) -> tuple[str, str]:
    port = port or free_port()
    out = Cli.in_dir(tmp_path).ok("create", "--config", str(config), "--port", str(port), "--foreground")
    found = re.search(r"Experiment ID: (\w+)", out)
    assert found is not None, out
    return found.group(1), out


def check_trials(
    tmp_path: Path, experiment_id: str, count: int, user: str, cluster: OpenPAIEmulator, *, reused: bool = True
) -> None:
    store = ExperimentStore.for_experiment_dir(tmp_path / "experiments" / experiment_id)
    try:
        trials = store.trials()
        assert [trial.status for trial in trials] == [TrialStatus.SUCCEEDED] * count
        for trial in trials:
            params = trial.hyper_parameters
            expected = [params["lr"] * (epoch + 1) + params["momentum"] / 10 for epoch in range(3)]
            periodical = [json.loads(m.data) for m in store.metrics(trial.id, type="PERIODICAL")]
            assert periodical == pytest.approx(expected)
            assert trial.final_value == pytest.approx(expected[-1])
            # reuse mode, NNI's default, where the storage is mounted here: the trial ran in a worker's job
            assert ("worker" in trial.handle) is reused
            name = f"nni_exp_{experiment_id}_{'worker_' + trial.handle['worker'] if reused else 'trial_' + trial.id}"
            assert trial.handle["job"] == name
            job = cluster.job(f"{user}~{name}")
            assert job.state == "Completed" and job.attempt is not None and job.attempt.completion is not None
            assert job.attempt.completion.code == 0
    finally:
        store.close()


def test_nni_s_v2_example_config_runs_unchanged(tmp_path: Path, cluster: OpenPAIEmulator) -> None:
    config = write_config(tmp_path, V2_CONFIG, cluster.url, cluster.token("alice"))
    experiment_id, _ = run(tmp_path, config)
    check_trials(tmp_path, experiment_id, 3, "alice", cluster)


def test_nni_s_v1_example_config_runs_unchanged(tmp_path: Path, cluster: OpenPAIEmulator) -> None:
    config = write_config(tmp_path, V1_CONFIG, cluster.url, cluster.token("your_pai_nni_user"))
    experiment_id, out = run(tmp_path, config)
    check_trials(tmp_path, experiment_id, 4, "your_pai_nni_user", cluster)
    assert "reuseMode: accepted but not acted on" not in out  # reuse: true is acted on


def test_nni_s_v2_example_without_the_storage_mounted_reports_through_the_relay_on_port_plus_one(
    tmp_path: Path, cluster: OpenPAIEmulator
) -> None:
    """NNI's REST channel: the same example with no localStorageMountPoint; the relay listens on the manager's
    port + 1, and the jobs carry the code and send the trials' files there."""
    template = (
        "\n".join(line for line in V2_CONFIG.splitlines() if "localStorageMountPoint" not in line) + "\n"
    )
    config = write_config(tmp_path, template, cluster.url, cluster.token("alice"))
    port = free_port_pair()
    experiment_id, _ = run(tmp_path, config, port)
    check_trials(tmp_path, experiment_id, 3, "alice", cluster, reused=False)
    on_storage = sorted((tmp_path / "mnt" / experiment_id / "trials").iterdir())
    assert len(on_storage) == 3
    for trial_dir in on_storage:
        relay = json.loads((trial_dir / "command.json").read_text())["relay"]
        assert relay["url"].endswith(f":{port + 1}/relay/v1/trials")
        mirror = tmp_path / "experiments" / experiment_id / "trials" / trial_dir.name
        assert (mirror / ".nni" / "metrics").read_bytes() == (trial_dir / ".nni" / "metrics").read_bytes()


def free_port_pair() -> int:
    """A port whose next one is free too (the manager's and its relay's)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("0.0.0.0", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")
