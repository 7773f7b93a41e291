"""The Ray cluster failing under trials: no node to place a trial, a node lost mid-trial, the head restarted.

A lost node and a restarted head are infrastructure failures: the retry policy (``maxTrialRetries``) runs the
trial again, and the processes of the lost attempt end (Ray kills the entrypoint's group when its supervisor
dies; the keeper, in a session of its own, is told by the kernel that entry.py died and ends the trial's tree).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest
from ray_cluster import NODE_IP, RayCluster
from ray_helpers import client, experiment_config, ray_context

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import process_start_ticks, wait_until_gone
from trialfleet.testing.running import RunningExperiment
from trialfleet.training_services.ray import RayTrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec

pytestmark = pytest.mark.ray

HELD = """
import json, os, sys, time
import nni

params = nni.get_next_parameter()
control = sys.argv[1]
attempt = os.path.basename(os.environ["NNI_SYS_DIR"])
with open(os.path.join(control, attempt + ".tmp"), "w") as f:
    json.dump({"pid": os.getpid()}, f)
os.rename(os.path.join(control, attempt + ".tmp"), os.path.join(control, attempt + ".json"))
while os.path.exists(os.path.join(control, "hold")):
    time.sleep(0.05)
nni.report_final_result(params["x"])
"""


async def test_a_trial_no_node_can_place_waits_with_rays_reason_until_cancelled(
    tmp_path: Path, healthy_cluster: RayCluster
) -> None:
    context = ray_context(tmp_path / "experiment", healthy_cluster, trial_resources={"nowhere": 1})
    service = RayTrainingService(context)
    await service.start()
    try:
        record = json.dumps({"parameter_id": 0, "parameter_source": "algorithm", "parameters": {}})
        submitted = await service.submit(TrialSpec("nowhere", 0, "true", tmp_path, record))
        assert isinstance(submitted, Submitted) and not submitted.started
        assert service.trial_dir_here(submitted.handle) is None  # a live trial's files: the job's log first
        reasons: list[str] = []
        for _ in range(60):
            batch = await service.poll()
            assert not batch.started and not batch.ended
            reasons += [waiting.reason for waiting in batch.waiting]
            if reasons:
                break
            await asyncio.sleep(0.5)
        assert reasons and "waiting for resources" in reasons[0], reasons
        await service.cancel("nowhere")
        ended = (await service.poll()).ended
        assert [(e.status, e.failure_kind) for e in ended] == [
            (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        ]
        assert service.trial_dir_here(submitted.handle) == Path(submitted.handle["trial_dir"])  # complete
        # Ray keeps the job PENDING; its stop waits for a node that can place it
        assert client(healthy_cluster).get_job_status(submitted.handle["submission_id"]) == "PENDING"
    finally:
        await service.close()


async def test_a_node_lost_mid_trial_is_an_infrastructure_failure_that_is_retried(
    tmp_path: Path, healthy_cluster: RayCluster
) -> None:
    control = tmp_path / "control"
    control.mkdir()
    (control / "hold").touch()
    config = experiment_config(
        tmp_path,
        healthy_cluster,
        HELD,
        maxTrialRetries=1,
        trialCommand=f"{sys.executable} trial.py {shlex.quote(str(control))}",
        trainingService={"trialResources": {"slot": 2}},  # only the second node has two slots
    )
    async with RunningExperiment(config) as run:
        await run.until(lambda: any(control.glob("*.json")), "the trial to run on the second node")
        (first,) = control.glob("*.json")
        pid = json.loads(first.read_text())["pid"]
        ticks = process_start_ticks(pid)
        (trial,) = run.manager.store.trials()
        info = client(healthy_cluster).get_job_info(trial.handle["submission_id"])
        assert healthy_cluster.alive_nodes()[info.driver_node_id] == NODE_IP
        healthy_cluster.node.kill_raylet()
        await run.until(lambda: run.manager.store.trial(trial.id).attempt == 1, "the retry", timeout=120)
        (lost,) = run.manager.store.attempts(trial.id)
        assert (lost["status"], lost["failure_kind"]) == ("FAILED", FailureKind.INFRASTRUCTURE.value)
        assert "JOB_SUPERVISOR_ACTOR_DIED" in lost["message"], lost
        await wait_until_gone(
            [pid], lambda p: process_start_ticks(p) if process_start_ticks(p) == ticks else None
        )
        waiting = lambda: run.manager.store.trial(trial.id).message or ""  # noqa: E731
        await run.until(
            lambda: "waiting for resources" in waiting(), "the retry to wait for a node with 2 slots"
        )
        healthy_cluster.node.stop()
        healthy_cluster.start_node()
        (control / "hold").unlink()
        await run.done()
        retried = run.manager.store.trial(trial.id)
        assert (retried.status, retried.attempt) == (TrialStatus.SUCCEEDED, 1)
        assert retried.final_value == retried.hyper_parameters["x"]


async def test_the_head_restarted_under_a_running_experiment_is_survived(
    tmp_path: Path, healthy_cluster: RayCluster
) -> None:
    control = tmp_path / "control"
    control.mkdir()
    (control / "hold").touch()
    config = experiment_config(
        tmp_path,
        healthy_cluster,
        HELD,
        maxTrialRetries=1,
        trialCommand=f"{sys.executable} trial.py {shlex.quote(str(control))}",
        trainingService={"trialResources": {"head": 1}},  # on the head node
    )
    async with RunningExperiment(config) as run:
        await run.until(lambda: any(control.glob("*.json")), "the trial to run on the head")
        (first,) = control.glob("*.json")
        pid = json.loads(first.read_text())["pid"]
        ticks = process_start_ticks(pid)
        healthy_cluster.head.stop()
        await wait_until_gone(
            [pid], lambda p: process_start_ticks(p) if process_start_ticks(p) == ticks else None
        )
        # a raylet whose head is gone gives up after a while (gcs_rpc_server_reconnect_timeout_s), and ray start
        # refuses a new head on a port that a raylet of this machine still names: the second node goes first
        healthy_cluster.node.stop()
        healthy_cluster.start_head()
        (trial,) = run.manager.store.trials()
        await run.until(lambda: run.manager.store.trial(trial.id).attempt == 1, "the retry", timeout=120)
        (lost,) = run.manager.store.attempts(trial.id)
        assert (lost["status"], lost["failure_kind"]) == ("FAILED", FailureKind.INFRASTRUCTURE.value)
        assert lost["message"].startswith("lost: Ray no longer knows the job"), lost
        (control / "hold").unlink()
        await run.done()
        retried = run.manager.store.trial(trial.id)
        assert (retried.status, retried.attempt) == (TrialStatus.SUCCEEDED, 1)
