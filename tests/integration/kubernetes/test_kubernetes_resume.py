"""A FrameworkController experiment whose manager is killed while trials run: ``trialfleet resume`` finds the
experiment's Frameworks by label, re-adopts them, and every trial ends once, with its metrics; in reuse mode (NNI's
default) the two re-adopted workers run the last two trials too."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from k8s_helpers import NFS_EXPORT, NFS_SERVER, trial_host
from kubernetes import client, config

from tests.emulators.kubernetes import KubernetesEmulator
from tests.integration.cli_harness import Cli, free_port, wait_until

TRIAL = """
import os, time
import nni

params = nni.get_next_parameter()
nni.report_intermediate_result(1)
hold = os.path.join({control!r}, "hold")
while os.path.exists(hold):
    time.sleep(0.05)
nni.report_final_result(params["x"])
"""
CONFIG = """\
searchSpace: {{x: {{_type: uniform, _value: [0, 1]}}}}
trialCommand: python3 trial.py
trialCodeDirectory: code
trialConcurrency: 2
maxTrialNumber: 4
experimentWorkingDirectory: {root}/experiments
tuner: {{name: Random}}
trainingService:
  platform: frameworkcontroller
  reuseMode: {reuse}
  kubeconfig: {kubeconfig}
  storage: {{storageType: nfs, server: {server}, path: {path}, localMountPoint: {root}/nfs}}
  taskRoles:
    - name: worker
      taskNumber: 1
      cpuNumber: 1
      memorySize: 256mb
      gpuNumber: 0
      frameworkAttemptCompletionPolicy: {{minFailedTaskCount: 1, minSucceedTaskCount: 1}}
"""


@pytest.mark.parametrize("reuse", [False, True], ids=["one Framework per trial", "reuse mode"])
def test_a_killed_manager_is_resumed_and_its_trials_readopted(
    tmp_path: Path, cluster: KubernetesEmulator, reuse: bool
) -> None:
    control = trial_host(tmp_path)
    control.touch("hold")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL.format(control=control.seen_by_trials))
    config_file = tmp_path / "config.yml"
    text = CONFIG.format(
        root=tmp_path,
        kubeconfig=cluster.kubeconfig,
        server=NFS_SERVER,
        path=NFS_EXPORT,
        reuse=str(reuse).lower(),
    )
    config_file.write_text(text)
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(config_file), "--port", str(free_port()))
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    try:
        trials = lambda: cli.json("trial", "ls", experiment_id, "--json")  # noqa: E731
        wait_until(lambda: [t["status"] for t in trials()] == ["RUNNING", "RUNNING"], "two running trials")
        manager = cli.json("experiment", "list", "--json")[0]["pid"]
        os.kill(manager, signal.SIGKILL)
        wait_until(lambda: not Path(f"/proc/{manager}").exists(), "the killed manager to be reaped")
        resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))
        assert "2 running trial(s) re-adopted" in resumed
        control.local.joinpath("hold").unlink()
        wait_until(
            lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE", timeout=180
        )
        finished = trials()
    finally:
        cli.run("stop", experiment_id)
    assert [t["status"] for t in finished] == ["SUCCEEDED"] * 4
    assert all(len(t["finalMetricData"]) == 1 for t in finished)
    custom = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))
    frameworks = custom.list_namespaced_custom_object(
        "frameworkcontroller.microsoft.com",
        "v1",
        "default",
        "frameworks",
        label_selector=f"expId={experiment_id}",
    )["items"]
    if reuse:  # the two workers re-adopted ran the last two trials: no Framework of a trial's own
        assert len(frameworks) == 2
        assert all(f["metadata"]["labels"]["trialfleet.io/worker"] for f in frameworks)
        return
    assert sorted(f["metadata"]["labels"]["trialId"] for f in frameworks) == sorted(
        t["trialJobId"] for t in finished
    )
