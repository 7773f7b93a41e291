"""Whole experiments on the Ray cluster: trials placed on both nodes by their resources, and NNI's example run
through the real CLI.

The head has one ``slot`` and the second node two (ray_cluster.py): trials that each ask for a slot run at most
one at a time on the head and two on the other node, which the trials' own start and end times show.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from ray_cluster import HEAD_IP, NODE_IP, RayCluster
from ray_helpers import client, experiment_config

from tests.integration.cli_harness import Cli, free_port
from trialfleet.status import TrialStatus
from trialfleet.testing.running import RunningExperiment

pytestmark = pytest.mark.ray

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
TRIAL = """
import json, os, time
import nni

params = nni.get_next_parameter()
start = time.time()
for step in range(3):
    nni.report_intermediate_result(params["x"] * 10 + step)
    time.sleep(0.5)
nni.report_final_result(params["x"])
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "ran.json"), "w") as f:
    json.dump({"start": start, "end": time.time(), "nni": nni.__file__}, f)
"""


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


async def test_trials_are_placed_on_both_nodes_by_their_resources(
    tmp_path: Path, healthy_cluster: RayCluster
) -> None:
    config = experiment_config(
        tmp_path,
        healthy_cluster,
        TRIAL,
        trialConcurrency=3,
        maxTrialNumber=6,
        trainingService={"trialCpuNumber": 0.5, "trialResources": {"slot": 1}},
    )
    async with RunningExperiment(config) as run:
        await run.done()
        trials = run.manager.store.trials()
        assert [trial.status for trial in trials] == [TrialStatus.SUCCEEDED] * 6, [t.message for t in trials]
        ips = {node_id: ip for node_id, ip in healthy_cluster.alive_nodes().items()}
        by_node: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for trial in trials:
            x = trial.hyper_parameters["x"]
            periodical = run.manager.store.metrics(trial.id, type="PERIODICAL")
            assert [json.loads(m.data) for m in periodical] == [x * 10 + step for step in range(3)]
            assert trial.final_value == x and trial.attempt == 0
            info = client(healthy_cluster).get_job_info(trial.handle["submission_id"])
            assert info.status == "SUCCEEDED" and info.metadata["trialfleet_trial"] == trial.id
            ran = json.loads((Path(trial.handle["trial_dir"]) / "ran.json").read_text())
            assert "/nni-shim/nni/" in ran["nni"]
            by_node[ips[info.driver_node_id]].append((ran["start"], ran["end"]))
    assert set(by_node) == {HEAD_IP, NODE_IP}, f"every trial ran on one node: {dict(by_node)}"
    assert most_at_once(by_node[HEAD_IP]) == 1
    assert most_at_once(by_node[NODE_IP]) <= 2


def test_the_nni_style_example_runs_through_the_cli(tmp_path: Path, healthy_cluster: RayCluster) -> None:
    """examples/ray/config.yml on NNI's example trial, with only where things are and how many trials changed."""
    data = yaml.safe_load((EXAMPLES / "ray" / "config.yml").read_text())
    data.update(
        maxTrialNumber=4,
        trialConcurrency=3,
        searchSpaceFile=str(EXAMPLES / "nni-style" / "search_space.json"),
        trialCodeDirectory=str(EXAMPLES / "nni-style"),
        trialCommand=data["trialCommand"].replace("python3", sys.executable),
        experimentWorkingDirectory=str(tmp_path / "experiments"),
    )
    data["trainingService"].update(
        address=healthy_cluster.address, nodeDirectory=str(healthy_cluster.root / "trials")
    )
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(data))
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()), "--foreground")
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    trials = cli.json("trial", "ls", experiment_id, "--json")
    # the example's Medianstop may stop a trial that started after another one ended, through Ray's stop
    statuses = {str(t["trialJobId"]): t["status"] for t in trials}
    assert len(statuses) == 4 and set(statuses.values()) <= {"SUCCEEDED", "EARLY_STOPPED"}, statuses
    succeeded = [t for t in trials if t["status"] == "SUCCEEDED"]
    assert succeeded and all("default" in t["finalMetricData"][0]["data"] for t in succeeded), trials
    jobs = client(healthy_cluster)
    for trial_id, status in statuses.items():
        job = jobs.get_job_status(f"nni_exp_{experiment_id}_trial_{trial_id}_attempt_0")
        assert job == ("SUCCEEDED" if status == "SUCCEEDED" else "STOPPED"), (trial_id, status, job)
    log = cli.ok("log", "trial", experiment_id, "--trial_id", str(trials[0]["trialJobId"]))
    assert "ray:nni_exp_" in log
