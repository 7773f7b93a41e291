"""Slurm driven through a login node over SSH: the contract, hostile values, an experiment, a dropped link.

The login node is an sshd host in its own network namespace (login_node.py); every Slurm command and every
file of the shared directory goes through it, as for a manager outside the cluster. The tests look at the
trials' files and processes directly, which the shared file system and process table allow.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from login_node import LoginFleet
from slurm_cluster import SlurmCluster
from slurm_helpers import slurm_context, submitted, trial_spec

from trialfleet.config import ExperimentConfig
from trialfleet.status import TrialStatus
from trialfleet.testing import (
    HOSTILE,
    TrainingServiceContract,
    poll_until,
    wait_for_file,
    wait_until_gone,
)
from trialfleet.testing.running import RunningExperiment
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.slurm import SlurmTrainingService
from trialfleet.training_services.spec import Deferred

pytestmark = [pytest.mark.slurm, pytest.mark.ssh]

PYTHON = shlex.quote(sys.executable)


class TestSlurmLoginNodeContract(TrainingServiceContract):
    """The contract through the login node. The code directory is uploaded there, so trials run in a copy."""

    # asserts that the trial runs in the manager's code directory itself: see test_hostile_values_* below
    test_hostile_values_run_exactly_as_given = None  # type: ignore[assignment]

    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        return SlurmTrainingService

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, login_fleet: LoginFleet) -> ExperimentContext:
        return slurm_context(tmp_path / "experiment 'dir' ü", tmp_path, login_node=login_fleet.machine())

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        async def kill(handle: Mapping[str, Any]) -> None:
            keeper = json.loads((Path(handle["trial_dir"]) / "keeper.json").read_text())
            os.kill(keeper["keeper_pid"], signal.SIGKILL)
            os.killpg(keeper["pgid"], signal.SIGKILL)
            await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

        return kill


class TestSlurmLoginNodeReuseContract(TestSlurmLoginNodeContract):
    """The same, with ``reuseMode: true``: workers are handed their trials through the login node (probe.py
    writes their inbox, as it writes the trial directories)."""

    @pytest.fixture
    def experiment_context(self, tmp_path: Path, login_fleet: LoginFleet) -> ExperimentContext:
        machine = login_fleet.machine()
        return slurm_context(tmp_path / "experiment 'dir' ü", tmp_path, login_node=machine, reuse_mode=True)


ECHO = """
import json, os, sys
with open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")) as f:
    parameters = json.load(f)["parameters"]
out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "parameters": parameters, "env": os.environ["HOSTILE_VALUE"],
       "setup": os.environ.get("FROM_SETUP"), "ssh": os.environ.get("SSH_CONNECTION")}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
"""


async def test_hostile_values_and_shared_directory_through_the_login_node(
    tmp_path: Path, login_fleet: LoginFleet
) -> None:
    hostile = "\n".join(HOSTILE)
    shared = tmp_path / "shared 'q' \"dq\" $(touch pwned) `touch pwned` %j ünï ✓\nnew line"
    code_dir = tmp_path / "code dir 'q' $(touch pwned) ünï"
    code_dir.mkdir()
    (code_dir / "echo.py").write_text(ECHO)
    (code_dir / ".nniignore").write_text("data/\n")
    (code_dir / "data").mkdir()
    (code_dir / "data" / "big.bin").write_bytes(b"x" * 1000)
    setup = f"export FROM_SETUP={shlex.quote(hostile)}"
    context = slurm_context(tmp_path / "exp", shared, login_node=login_fleet.machine(), setup_script=setup)
    service = SlurmTrainingService(context)
    await service.start()
    try:
        command = f"{PYTHON} echo.py " + " ".join(map(shlex.quote, HOSTILE))
        spec = trial_spec("hostile", command, code_dir, env={"HOSTILE_VALUE": hostile})
        handle = (await submitted(service, spec)).handle
        ended = (await poll_until(service, lambda s: "hostile" in s.ended)).ended["hostile"]
        assert ended.status is TrialStatus.SUCCEEDED, ended
        echoed = json.loads(await service.read_trial_file("hostile", handle, "echo.json"))
    finally:
        await service.close()
    assert echoed["argv"] == HOSTILE and echoed["env"] == hostile and echoed["setup"] == hostile
    assert echoed["parameters"] == {"x": 1}
    copy = Path(echoed["cwd"])  # the upload, under the shared directory, .nniignore honoured
    assert copy.parent == shared / context.experiment_id / "code" and not (copy / "data").exists()
    assert (copy / "echo.py").read_text() == ECHO
    assert Path(handle["trial_dir"]).parent == shared / context.experiment_id / "trials"
    # sbatch ran in an SSH session on the login node (sbatch hands the session's environment to the job)
    assert echoed["ssh"].split()[2:] == [login_fleet.host.address, "22"]
    assert list(tmp_path.rglob("pwned")) == []


STEADY = """
import json, os, sys, time
control = sys.argv[1]
metrics = open(os.path.join(os.environ["NNI_SYS_DIR"], ".nni", "metrics"), "ab", buffering=0)

def report(kind, sequence, value):
    record = {"parameter_id": 1, "trial_job_id": os.environ["NNI_TRIAL_JOB_ID"], "type": kind,
              "sequence": sequence, "value": json.dumps(value)}
    payload = (json.dumps(record) + "\\n").encode()
    metrics.write(b"ME%06d" % len(payload) + payload)

for step in range(3):
    report("PERIODICAL", step, step)
while not os.path.exists(os.path.join(control, "go on")):
    time.sleep(0.05)
for step in range(3, 6):
    report("PERIODICAL", step, step)
report("FINAL", 0, 6)
open(os.path.join(control, "done"), "w").close()
"""


async def test_a_dropped_link_to_the_login_node_loses_no_trial(
    tmp_path: Path, login_fleet: LoginFleet, slurm_cluster: SlurmCluster
) -> None:
    code_dir, control = tmp_path / "code", tmp_path / "control"
    code_dir.mkdir()
    control.mkdir()
    (code_dir / "steady.py").write_text(STEADY)
    command = f"{PYTHON} steady.py {shlex.quote(str(control))}"
    service = SlurmTrainingService(
        slurm_context(tmp_path / "exp", tmp_path, login_node=login_fleet.machine())
    )
    await service.start()
    try:
        handle = (await submitted(service, trial_spec("steady", command, code_dir))).handle
        seen = await poll_until(service, lambda s: len(s.metrics) == 3)
        login_fleet.host.link_down()
        (control / "go on").touch()
        await wait_for_file(control / "done")
        await wait_for_job_to_end(slurm_cluster, handle["job_id"])
        # while the link is down: polls say nothing and raise nothing, a new trial waits
        for _ in range(3):
            seen.add(await service.poll())
        later = await service.submit(trial_spec("later", command, code_dir))
        assert isinstance(later, Deferred) and "unreachable" in later.reason, later
        assert seen.ended == {} and len(seen.metrics) == 3
        login_fleet.host.link_up()
        seen = await poll_until(service, lambda s: "steady" in s.ended, seen)
        assert seen.ended["steady"].status is TrialStatus.SUCCEEDED
        assert [(m.type, m.sequence, m.data) for m in seen.metrics] == [
            *(("PERIODICAL", step, str(step)) for step in range(6)),
            ("FINAL", 0, "6"),
        ]
        assert seen.problems == []
        relaunched = await submitted(service, trial_spec("later", command, code_dir))  # offered again
        assert relaunched.handle["trial_dir"].endswith("/trials/later")
    finally:
        await service.close()


async def wait_for_job_to_end(cluster: SlurmCluster, job_id: str) -> None:
    state = ""
    for _ in range(600):
        state = cluster.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").stdout.strip()
        if state == "COMPLETED":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"stuck: job {job_id} is {state!r}, not COMPLETED, after 60 s")


TRIAL = """
import nni
params = nni.get_next_parameter()
for step in range(3):
    nni.report_intermediate_result(params["x"] * 10 + step)
nni.report_final_result(params["x"])
"""


async def test_an_experiment_through_the_login_node(
    tmp_path: Path, login_fleet: LoginFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "trial.py").write_text(TRIAL)
    config = ExperimentConfig.from_dict(
        {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": "python3 trial.py",
            "trialCodeDirectory": str(code_dir),
            "trialConcurrency": 2,
            "maxTrialNumber": 4,
            "tuner": {"name": "Random"},
            "experimentWorkingDirectory": str(tmp_path / "experiments"),
            "trainingService": {
                "platform": "slurm",
                "sharedDirectory": str(tmp_path / "cluster-shared"),
                "pythonPath": str(Path(sys.executable).parent),
                "loginNode": login_fleet.host.machine(),
            },
        }
    )
    async with RunningExperiment(config) as experiment:
        await experiment.done()
        trials = experiment.store.trials()
        assert [trial.status for trial in trials] == [TrialStatus.SUCCEEDED] * 4
        for trial in trials:
            x = trial.hyper_parameters["x"]
            periodical = experiment.store.metrics(trial.id, type="PERIODICAL")
            assert [json.loads(m.data) for m in periodical] == [x * 10 + step for step in range(3)]
            assert trial.final_value == x
            assert trial.handle["trial_dir"].startswith(str(tmp_path / "cluster-shared"))
