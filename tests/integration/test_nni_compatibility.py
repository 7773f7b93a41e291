"""NNI 3.0's surface, item by item, against the real console script and real managers.

Every "works" and "differs" row of ``docs/nni-compatibility.md`` names the test here (or elsewhere) that shows
it. One experiment, made with ``trialfleet create`` like ``nnictl create``, serves most rows: its trials go
through every function of the trial SDK and record what they saw, and the nnictl commands, REST routes and
Python API methods are checked against it. Launch commands (create, resume, view, stop, delete) go through
the life of a second, small experiment, row after row.

The main experiment's GridSearch proposes each ``x`` of its search space once, so every search-space update
adds exactly the trials of the new values. Tests that need a running trial add a customized one that waits
until it is cancelled.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.cli_harness import CONSOLE_SCRIPT, Cli, free_port, processes_mentioning, wait_until

API = "/api/v1/nni"
GRID = [0.1, 0.2, 0.3, 0.4]

#: what the trials report about their environment
ENVIRONMENT = [
    "NNI_PLATFORM",
    "NNI_EXP_ID",
    "NNI_TRIAL_JOB_ID",
    "NNI_SYS_DIR",
    "NNI_OUTPUT_DIR",
    "NNI_TRIAL_SEQ_ID",
    "NNI_CODE_DIR",
    "NNI_TRIAL_COMMAND_CHANNEL",
    "REUSE_MODE",
    "MULTI_PHASE",
    "CUDA_VISIBLE_DEVICES",
    "NNI_CHECKPOINT_DIRECTORY",
]

TRIAL = f"""
import argparse, json, os, sys, time
import nni
import nni.trial
from nni.utils import extract_scalar_reward, merge_parameter

sequence = nni.get_sequence_id()
params = nni.get_next_parameters() if sequence == 1 else nni.get_next_parameter()
deadline = time.time() + 300
while params.get("hold") and time.time() < deadline:  # a trial that waits to be cancelled
    time.sleep(0.05)
report = {{
    "parameters": params,
    "second_call": nni.get_next_parameter(),
    "current": nni.get_current_parameter(),
    "current_x": nni.get_current_parameter("x"),
    "experiment_id": nni.get_experiment_id(),
    "trial_id": nni.get_trial_id(),
    "sequence_id": sequence,
    "environment": {{name: os.environ.get(name) for name in {ENVIRONMENT!r}}},
    "cwd": os.getcwd(),
    "merged": vars(merge_parameter(argparse.Namespace(x=0.0, epochs=3), {{"x": params["x"]}})),
    "dumped": nni.load(nni.dump({{"x": params["x"], "tags": ["a"]}})),
    "traced": nni.trace(merge_parameter) is merge_parameter,
    "mutables": [nni.choice("c", [1, 2]), nni.uniform("u", 0, 1), nni.quniform("q", 0, 1, 0.5),
                 nni.loguniform("l", 1e-3, 1), nni.qloguniform("ql", 1, 100, 2), nni.normal("n", 0, 1),
                 nni.qnormal("qn", 0, 1, 0.5)],
    "scalar": extract_scalar_reward({{"default": params["x"], "loss": 1}}),
}}
nni.report_intermediate_result(params["x"])
nni.report_intermediate_result({{"default": params["x"] * 2, "epoch": 2}})
nni.trial.overwrite_intermediate_seq(10)
nni.report_intermediate_result(params["x"] * 3)
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "sdk.json"), "w") as out:
    json.dump(report, out)
print("stdout of", nni.get_trial_id())
print("stderr of", nni.get_trial_id(), file=sys.stderr)
nni.report_final_result({{"default": params["x"], "loss": 1 - params["x"]}})
"""

CONFIG = """\
experimentName: nni-surface
searchSpaceFile: search_space.json
trialCommand: "[[ -n $NNI_TRIAL_JOB_ID ]] && {python} trial.py"
trialCodeDirectory: code
trialConcurrency: 2
maxTrialNumber: 30
experimentWorkingDirectory: {workdir}
tuner:
  name: GridSearch
trainingService:
  platform: local
"""


def _space(values: list[float]) -> dict[str, Any]:
    return {"x": {"_type": "choice", "_value": values}}


def _experiment_id(output: str) -> str:
    match = re.search(r"Experiment ID: (\w+)", output)
    assert match, output
    return match.group(1)


@dataclass
class Shared:
    """The main experiment: running, on ``port``, with the grid's trials done."""

    cli: Cli
    root: Path
    port: int
    experiment_id: str
    experiment_dir: Path
    http: httpx.Client

    def get(self, path: str, **kwargs: Any) -> Any:
        response = self.http.get(path, **kwargs)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.get("/trial-jobs"))

    def status_of(self, trial_id: str) -> str:
        return str(self.get(f"/trial-jobs/{trial_id}")["status"])

    def succeeded(self) -> list[dict[str, Any]]:
        return [job for job in self.jobs() if job["status"] == "SUCCEEDED"]

    def grid_trials(self) -> list[dict[str, Any]]:
        return [job for job in self.succeeded() if _record(job)["parameter_source"] == "algorithm"]

    def held_trial(self) -> str:
        """A customized trial that runs until it is cancelled; its id once it runs."""
        response = self.http.post("/trial-jobs", json={"x": 0.1, "hold": True})
        assert response.status_code == 200, response.text
        sequence_id = response.json()["sequenceId"]
        wait_until(
            lambda: any(j["sequenceId"] == sequence_id and j["status"] == "RUNNING" for j in self.jobs()),
            "the held trial to run",
        )
        return next(j["trialJobId"] for j in self.jobs() if j["sequenceId"] == sequence_id)

    def wait_trial(self, trial_id: str, status: str) -> None:
        wait_until(lambda: self.status_of(trial_id) == status, f"trial {trial_id} to be {status}")

    def add_to_space(self, value: float) -> dict[str, Any]:
        values = self.get("/experiment")["params"]["searchSpace"]["x"]["_value"]
        return _space([*values, value])

    def wait_for_x(self, value: float) -> dict[str, Any]:
        """The grid trial with parameter ``x == value``, once it succeeded."""

        def done() -> bool:
            return any(_record(j)["parameters"].get("x") == value for j in self.grid_trials())

        wait_until(done, f"a trial with x={value}")
        return next(j for j in self.grid_trials() if _record(j)["parameters"].get("x") == value)


def _record(job: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(job["hyperParameters"][0]))


def _trial_dir(job: dict[str, Any]) -> Path:
    platform, _, path = job["logPath"].partition(":")
    assert platform == "local", job["logPath"]
    return Path(path)


def _report(job: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads((_trial_dir(job) / "sdk.json").read_text()))


def _metrics(shared: Shared, trial_id: str, **params: str) -> list[dict[str, Any]]:
    return list(shared.get(f"/metric-data/{trial_id}", params=params))


def _decoded(record: dict[str, Any]) -> Any:
    return json.loads(json.loads(record["data"]))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    root = tmp_path_factory.mktemp("nni-surface")
    (root / "code").mkdir()
    (root / "code" / "trial.py").write_text(TRIAL)
    (root / "search_space.json").write_text(json.dumps(_space(GRID)))
    config = root / "config.yml"
    config.write_text(CONFIG.format(python=sys.executable, workdir=root / "experiments"))
    cli = Cli.in_dir(root)
    # variables that would switch a real nni to another channel: the trials must not inherit them
    cli.env.update(
        NNI_TRIAL_COMMAND_CHANNEL="http://127.0.0.1:9/bogus", REUSE_MODE="true", MULTI_PHASE="true"
    )
    port = free_port()
    experiment_id = _experiment_id(cli.ok("create", "--config", str(config), "--port", str(port)))
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}{API}", timeout=30, trust_env=False)
    state = Shared(cli, root, port, experiment_id, root / "experiments" / experiment_id, http)
    try:
        wait_until(lambda: len(state.grid_trials()) == len(GRID), "the grid's trials", timeout=120)
        wait_until(lambda: state.get("/check-status")["status"] == "DONE", "the grid to be done")
        yield state
    finally:
        http.close()
        cli.run("stop", "--all")
        assert processes_mentioning(str(root)) == []


# ---- the trial SDK, in real trials -------------------------------------------------------------------


def _each_grid_trial(shared: Shared) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    jobs = [j for j in shared.grid_trials() if _record(j)["parameters"]["x"] in GRID]
    assert len(jobs) == len(GRID)
    return [(job, _report(job)) for job in jobs]


def sdk_get_next_parameter(shared: Shared) -> None:
    for job, report in _each_grid_trial(shared):
        if job["sequenceId"] != 1:
            assert report["parameters"] == _record(job)["parameters"]
    assert sorted(report["parameters"]["x"] for _, report in _each_grid_trial(shared)) == GRID


def sdk_get_next_parameters(shared: Shared) -> None:
    (job, report) = next((j, r) for j, r in _each_grid_trial(shared) if j["sequenceId"] == 1)
    assert report["parameters"] == _record(job)["parameters"]


def sdk_second_call(shared: Shared) -> None:
    assert all(report["second_call"] is None for _, report in _each_grid_trial(shared))


def sdk_get_current_parameter(shared: Shared) -> None:
    for _, report in _each_grid_trial(shared):
        assert report["current"] == report["parameters"]
        assert report["current_x"] == report["parameters"]["x"]


def sdk_report_intermediate_result(shared: Shared) -> None:
    for job, report in _each_grid_trial(shared):
        x = report["parameters"]["x"]
        periodical = _metrics(shared, job["trialJobId"], type="PERIODICAL")
        assert [_decoded(r) for r in periodical] == [x, {"default": x * 2, "epoch": 2}, x * 3]
        assert {r["parameterId"] for r in periodical} == {str(_record(job)["parameter_id"])}


def sdk_overwrite_intermediate_seq(shared: Shared) -> None:
    for job, _ in _each_grid_trial(shared):
        assert [r["sequence"] for r in _metrics(shared, job["trialJobId"], type="PERIODICAL")] == [0, 1, 10]


def sdk_report_final_result(shared: Shared) -> None:
    for job, report in _each_grid_trial(shared):
        x = report["parameters"]["x"]
        (final,) = _metrics(shared, job["trialJobId"], type="FINAL")
        assert _decoded(final) == {"default": x, "loss": 1 - x} and final["sequence"] == 0
        assert [_decoded(m) for m in job["finalMetricData"]] == [{"default": x, "loss": 1 - x}]


def sdk_ids(shared: Shared) -> None:
    for job, report in _each_grid_trial(shared):
        assert report["experiment_id"] == shared.experiment_id
        assert report["trial_id"] == job["trialJobId"]
        assert report["sequence_id"] == job["sequenceId"]


def sdk_helpers(shared: Shared) -> None:
    for _, report in _each_grid_trial(shared):
        x = report["parameters"]["x"]
        assert report["merged"] == {"x": x, "epochs": 3}
        assert report["dumped"] == {"x": x, "tags": ["a"]}
        assert report["traced"] is True
        assert report["scalar"] == x


def sdk_mutables(shared: Shared) -> None:
    _, report = _each_grid_trial(shared)[0]
    assert report["mutables"] == [
        {"_type": "choice", "_value": [1, 2]},
        {"_type": "uniform", "_value": [0, 1]},
        {"_type": "quniform", "_value": [0, 1, 0.5]},
        {"_type": "loguniform", "_value": [1e-3, 1]},
        {"_type": "qloguniform", "_value": [1, 100, 2]},
        {"_type": "normal", "_value": [0, 1]},
        {"_type": "qnormal", "_value": [0, 1, 0.5]},
    ]


SDK: list[tuple[str, Callable[[Shared], None]]] = [
    ("get_next_parameter", sdk_get_next_parameter),
    ("get_next_parameters", sdk_get_next_parameters),
    ("get_next_parameter called twice", sdk_second_call),
    ("get_current_parameter", sdk_get_current_parameter),
    ("report_intermediate_result", sdk_report_intermediate_result),
    ("trial.overwrite_intermediate_seq", sdk_overwrite_intermediate_seq),
    ("report_final_result", sdk_report_final_result),
    ("get_experiment_id get_trial_id get_sequence_id", sdk_ids),
    ("dump load trace merge_parameter extract_scalar_reward", sdk_helpers),
    ("choice uniform quniform loguniform qloguniform normal qnormal", sdk_mutables),
]


@pytest.mark.parametrize("check", [c for _, c in SDK], ids=[name for name, _ in SDK])
def test_sdk_function_in_a_trial(shared: Shared, check: Callable[[Shared], None]) -> None:
    check(shared)


def _environment(shared: Shared) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(job, report["environment"]) for job, report in _each_grid_trial(shared)]


def env_platform(shared: Shared) -> None:
    assert {env["NNI_PLATFORM"] for _, env in _environment(shared)} == {"local"}


def env_ids(shared: Shared) -> None:
    for job, env in _environment(shared):
        assert env["NNI_EXP_ID"] == shared.experiment_id
        assert env["NNI_TRIAL_JOB_ID"] == job["trialJobId"]
        assert env["NNI_TRIAL_SEQ_ID"] == str(job["sequenceId"])


def env_directories(shared: Shared) -> None:
    for job, env in _environment(shared):
        assert Path(env["NNI_SYS_DIR"]) == Path(env["NNI_OUTPUT_DIR"]) == _trial_dir(job)
        assert Path(env["NNI_SYS_DIR"]).parent == shared.experiment_dir / "trials"


def env_code_dir(shared: Shared) -> None:
    for job, env in _environment(shared):
        assert Path(env["NNI_CODE_DIR"]) == shared.root / "code" == Path(_report(job)["cwd"])


def env_channel_variables(shared: Shared) -> None:
    for _, env in _environment(shared):  # set in the environment of create, not passed on
        assert env["NNI_TRIAL_COMMAND_CHANNEL"] is None
        assert env["REUSE_MODE"] is None and env["MULTI_PHASE"] is None


def env_cuda_visible_devices(shared: Shared) -> None:
    for _, env in _environment(shared):  # no trialGpuNumber: left as the manager has it
        assert env["CUDA_VISIBLE_DEVICES"] == shared.cli.env.get("CUDA_VISIBLE_DEVICES")


def env_checkpoint_directory(shared: Shared) -> None:
    for _, env in _environment(shared):  # the manager's, where the tuner runs (trials inherit it)
        assert Path(env["NNI_CHECKPOINT_DIRECTORY"]) == shared.experiment_dir / "checkpoint"


def env_bash(shared: Shared) -> None:
    assert shared.get("/experiment")["params"]["trialCommand"].startswith("[[ ")  # bash, not sh
    assert len(shared.grid_trials()) >= len(GRID)


ENV: list[tuple[str, Callable[[Shared], None]]] = [
    ("trial command run by bash", env_bash),
    ("NNI_PLATFORM", env_platform),
    ("NNI_EXP_ID NNI_TRIAL_JOB_ID NNI_TRIAL_SEQ_ID", env_ids),
    ("NNI_SYS_DIR NNI_OUTPUT_DIR", env_directories),
    ("NNI_CODE_DIR and working directory", env_code_dir),
    ("NNI_TRIAL_COMMAND_CHANNEL REUSE_MODE MULTI_PHASE", env_channel_variables),
    ("CUDA_VISIBLE_DEVICES", env_cuda_visible_devices),
    ("NNI_CHECKPOINT_DIRECTORY", env_checkpoint_directory),
]


@pytest.mark.parametrize("check", [c for _, c in ENV], ids=[name for name, _ in ENV])
def test_trial_environment(shared: Shared, check: Callable[[Shared], None]) -> None:
    check(shared)


# ---- REST: every route of NNI's manager, against the running experiment ------------------------------


def _put_profile(shared: Shared, update_type: str, **params: Any) -> httpx.Response:
    profile = shared.get("/experiment")
    profile["params"].update(params)
    return shared.http.put("/experiment", params={"update_type": update_type}, json=profile)


def rest_version(shared: Shared) -> None:
    from trialfleet import __version__

    assert shared.get("/version") == __version__


def rest_check_status(shared: Shared) -> None:
    assert shared.get("/check-status") == {"status": "DONE", "errors": []}


def rest_get_experiment(shared: Shared) -> None:
    profile = shared.get("/experiment")
    assert {"params", "id", "execDuration", "logDir", "startTime", "nextSequenceId", "revision"} <= set(
        profile
    )
    assert profile["id"] == shared.experiment_id and profile["logDir"] == str(shared.experiment_dir)
    assert profile["params"]["experimentName"] == "nni-surface"
    assert profile["params"]["trainingService"]["platform"] == "local"
    assert profile["nextSequenceId"] == max(j["sequenceId"] for j in shared.jobs()) + 1


def rest_put_trial_concurrency(shared: Shared) -> None:
    assert _put_profile(shared, "TRIAL_CONCURRENCY", trialConcurrency=3).status_code == 200
    assert shared.get("/experiment")["params"]["trialConcurrency"] == 3


def rest_put_max_exec_duration(shared: Shared) -> None:
    assert _put_profile(shared, "MAX_EXEC_DURATION", maxExperimentDuration="90m").status_code == 200
    assert shared.get("/experiment")["params"]["maxExperimentDuration"] == 5400


def rest_put_max_trial_num(shared: Shared) -> None:
    assert _put_profile(shared, "MAX_TRIAL_NUM", maxTrialNumber=35).status_code == 200
    assert shared.get("/experiment")["params"]["maxTrialNumber"] == 35


def rest_put_search_space(shared: Shared) -> None:
    space = shared.add_to_space(0.7)
    assert _put_profile(shared, "SEARCH_SPACE", searchSpace=space).status_code == 200
    assert shared.get("/experiment")["params"]["searchSpace"] == space
    shared.wait_for_x(0.7)  # the tuner proposes from the new space


def rest_post_experiment(shared: Shared) -> None:
    response = shared.http.post("/experiment", json={"trialConcurrency": 1})
    assert response.status_code == 409 and shared.experiment_id in response.json()["error"]


def rest_experiment_metadata(shared: Shared) -> None:
    entry = shared.get("/experiment-metadata")
    assert (entry["id"], entry["port"], entry["platform"]) == (shared.experiment_id, shared.port, "local")
    assert entry["status"] in ("RUNNING", "TUNER_NO_MORE_TRIAL", "DONE")
    assert entry["experimentName"] == "nni-surface" and entry["logDir"] == str(shared.experiment_dir)


def rest_experiments_info(shared: Shared) -> None:
    entries = {entry["id"]: entry for entry in shared.get("/experiments-info")}
    assert entries[shared.experiment_id]["port"] == shared.port


def rest_import_data(shared: Shared) -> None:
    records = [{"parameter": {"x": 0.95}, "value": 0.95}]
    response = shared.http.post("/experiment/import-data", json=records)
    assert response.status_code == 200 and response.content == b""
    assert [json.loads(item) for item in shared.get("/experiment/imported-data")][-1] == records


def rest_imported_data(shared: Shared) -> None:
    imported = shared.get("/experiment/imported-data")
    assert isinstance(imported, list) and all(isinstance(json.loads(item), list) for item in imported)


def rest_cluster_metadata(shared: Shared) -> None:
    assert shared.http.put("/experiment/cluster-metadata", json={"k": "v"}).status_code == 400


def rest_job_statistics(shared: Shared) -> None:
    counts: dict[str, int] = {}
    for job in shared.jobs():
        counts[job["status"]] = counts.get(job["status"], 0) + 1
    statistics = {s["trialJobStatus"]: s["trialJobNumber"] for s in shared.get("/job-statistics")}
    assert statistics == counts


def rest_trial_jobs(shared: Shared) -> None:
    for job in shared.grid_trials():
        assert {
            "trialJobId",
            "sequenceId",
            "status",
            "startTime",
            "endTime",
            "hyperParameters",
            "logPath",
        } <= set(job)
        assert set(_record(job)) == {"parameter_id", "parameter_source", "parameters", "parameter_index"}
        assert len(job["finalMetricData"]) == 1


def rest_trial_jobs_status(shared: Shared) -> None:
    held = shared.held_trial()
    assert [j["trialJobId"] for j in shared.get("/trial-jobs", params={"status": "RUNNING"})] == [held]
    succeeded = shared.get("/trial-jobs", params={"status": "SUCCEEDED"})
    assert succeeded and {j["status"] for j in succeeded} == {"SUCCEEDED"}
    assert shared.http.delete(f"/trial-jobs/{held}").status_code == 200
    shared.wait_trial(held, "USER_CANCELED")


def rest_trial_job(shared: Shared) -> None:
    job = shared.grid_trials()[0]
    assert shared.get(f"/trial-jobs/{job['trialJobId']}") == job
    assert shared.http.get("/trial-jobs/nosuchtrial").status_code == 404


def rest_post_trial_jobs(shared: Shared) -> None:
    response = shared.http.post("/trial-jobs", json={"x": 0.4})
    assert response.status_code == 200
    sequence_id = response.json()["sequenceId"]
    wait_until(
        lambda: any(j["sequenceId"] == sequence_id for j in shared.succeeded()),
        "the customized trial to succeed",
    )
    job = next(j for j in shared.jobs() if j["sequenceId"] == sequence_id)
    assert _record(job)["parameter_source"] == "customized" and _record(job)["parameters"] == {"x": 0.4}
    assert _report(job)["parameters"] == {"x": 0.4}


def rest_delete_trial_job(shared: Shared) -> None:
    held = shared.held_trial()
    response = shared.http.delete(f"/trial-jobs/{held}")
    assert response.status_code == 200 and response.content == b""
    shared.wait_trial(held, "USER_CANCELED")
    wait_until(lambda: processes_mentioning(f"NNI_TRIAL_JOB_ID={held}") == [], "the trial's processes to end")


def rest_metric_data(shared: Shared) -> None:
    records = shared.get("/metric-data")
    assert {r["trialJobId"] for r in records} >= {j["trialJobId"] for j in shared.grid_trials()}
    assert set(records[0]) == {"timestamp", "trialJobId", "parameterId", "type", "sequence", "data"}
    assert {r["type"] for r in shared.get("/metric-data", params={"type": "FINAL"})} == {"FINAL"}


def rest_metric_data_of_a_trial(shared: Shared) -> None:
    job = shared.grid_trials()[0]
    records = _metrics(shared, job["trialJobId"])
    assert [(r["type"], r["sequence"]) for r in records] == [
        ("PERIODICAL", 0),
        ("PERIODICAL", 1),
        ("PERIODICAL", 10),
        ("FINAL", 0),
    ]
    assert [r["type"] for r in _metrics(shared, job["trialJobId"], type="FINAL")] == ["FINAL"]


def rest_metric_data_range(shared: Shared) -> None:
    by_sequence = {j["sequenceId"]: j["trialJobId"] for j in shared.jobs()}
    ranged = shared.get("/metric-data-range/1/2")
    assert {r["trialJobId"] for r in ranged} == {by_sequence[1], by_sequence[2]}


def rest_metric_data_latest(shared: Shared) -> None:
    latest = shared.get("/metric-data-latest/")
    for job in shared.grid_trials():
        mine = sorted((r["type"], r["sequence"]) for r in latest if r["trialJobId"] == job["trialJobId"])
        assert mine == [("FINAL", 0), ("PERIODICAL", 10)]  # every final, the newest intermediate


def rest_trial_file(shared: Shared) -> None:
    job = shared.grid_trials()[0]
    trial_id = job["trialJobId"]
    stdout = shared.http.get(f"/trial-file/{trial_id}/stdout")
    assert stdout.headers["content-type"].startswith("text/plain")
    assert f"stdout of {trial_id}" in stdout.text
    assert f"stderr of {trial_id}" in shared.http.get(f"/trial-file/{trial_id}/stderr").text
    assert f"stdout of {trial_id}" in shared.http.get(f"/trial-file/{trial_id}/trial.log").text
    assert json.loads(shared.http.get(f"/trial-file/{trial_id}/sdk.json").text)["trial_id"] == trial_id
    assert shared.http.get(f"/trial-file/{trial_id}/no-such-file").status_code == 404


def rest_export_data(shared: Shared) -> None:
    exported = {r["trialJobId"]: r for r in shared.get("/export-data")}
    for job in shared.grid_trials():
        record = exported[job["trialJobId"]]
        x = _record(job)["parameters"]["x"]
        assert record["parameter"] == {"x": x} and json.loads(record["value"]) == {
            "default": x,
            "loss": 1 - x,
        }


def rest_tensorboard(shared: Shared) -> None:
    unknown = shared.http.post("/tensorboard", json={"trials": "nosuchtrial"})
    assert unknown.status_code == 400 and "nosuchtrial" in unknown.json()["error"]
    for method in ("GET", "PUT", "DELETE"):
        assert shared.http.request(method, "/tensorboard/some-task").status_code == 404


def rest_tensorboard_tasks(shared: Shared) -> None:
    assert shared.get("/tensorboard-tasks") == []
    assert shared.http.delete("/tensorboard-tasks").status_code == 200


def rest_errors(shared: Shared) -> None:
    missing = shared.http.get("/trial-jobs/nosuchtrial")
    assert missing.status_code == 404 and "nosuchtrial" in missing.json()["error"]
    bad = shared.http.put("/experiment", params={"update_type": "TRIAL_CONCURRENCY"}, json={"params": {}})
    assert bad.status_code == 422 and "trialConcurrency" in bad.json()["error"]
    assert "access-control-allow-origin" not in {k.lower() for k in missing.headers}


def rest_logs(shared: Shared) -> None:
    root = f"http://127.0.0.1:{shared.port}"
    for name in ("nnimanager.log", "dispatcher.log"):
        response = httpx.get(f"{root}/logs/{name}", timeout=30, trust_env=False)
        assert response.status_code == 200 and f"Starting experiment: {shared.experiment_id}" in response.text


def rest_web_ui_pages(shared: Shared) -> None:
    root = f"http://127.0.0.1:{shared.port}"
    for page in ("/oview", "/detail", "/experiment"):
        response = httpx.get(f"{root}{page}", timeout=30, trust_env=False, follow_redirects=True)
        assert response.status_code == 200 and "text/html" in response.headers["content-type"], page


def rest_not_offered_channels(shared: Shared) -> None:
    root = f"http://127.0.0.1:{shared.port}"
    for path in ("/tuner", "/netron/model.onnx", "/env/local-env/abcde", "/platform/remote/1"):
        assert httpx.get(f"{root}{path}", timeout=30, trust_env=False).status_code == 404, path


REST: list[tuple[str, Callable[[Shared], None]]] = [
    ("GET /version", rest_version),
    ("GET /check-status", rest_check_status),
    ("GET /experiment", rest_get_experiment),
    ("PUT /experiment TRIAL_CONCURRENCY", rest_put_trial_concurrency),
    ("PUT /experiment MAX_EXEC_DURATION", rest_put_max_exec_duration),
    ("PUT /experiment MAX_TRIAL_NUM", rest_put_max_trial_num),
    ("PUT /experiment SEARCH_SPACE", rest_put_search_space),
    ("POST /experiment", rest_post_experiment),
    ("GET /experiment-metadata", rest_experiment_metadata),
    ("GET /experiments-info", rest_experiments_info),
    ("POST /experiment/import-data", rest_import_data),
    ("GET /experiment/imported-data", rest_imported_data),
    ("PUT /experiment/cluster-metadata", rest_cluster_metadata),
    ("GET /job-statistics", rest_job_statistics),
    ("GET /trial-jobs", rest_trial_jobs),
    ("GET /trial-jobs?status", rest_trial_jobs_status),
    ("GET /trial-jobs/:id", rest_trial_job),
    ("POST /trial-jobs", rest_post_trial_jobs),
    ("DELETE /trial-jobs/:id", rest_delete_trial_job),
    ("GET /metric-data", rest_metric_data),
    ("GET /metric-data/:id", rest_metric_data_of_a_trial),
    ("GET /metric-data-range", rest_metric_data_range),
    ("GET /metric-data-latest", rest_metric_data_latest),
    ("GET /trial-file", rest_trial_file),
    ("GET /export-data", rest_export_data),
    ("/tensorboard", rest_tensorboard),
    ("/tensorboard-tasks", rest_tensorboard_tasks),
    ("errors", rest_errors),
    ("/logs", rest_logs),
    ("web UI pages", rest_web_ui_pages),
    ("/tuner /netron /env /platform", rest_not_offered_channels),
]


@pytest.mark.parametrize("check", [c for _, c in REST], ids=[name for name, _ in REST])
def test_rest_route(shared: Shared, check: Callable[[Shared], None]) -> None:
    check(shared)


# ---- nnictl's commands on the running experiment ------------------------------------------------------

NNICTL_DATE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d$")

CUSTOM_TUNER = """
from nni.tuner import Tuner

class FixedTuner(Tuner):
    def update_search_space(self, search_space):
        pass

    def generate_parameters(self, parameter_id, **kwargs):
        return {"x": 0.5}

    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        pass

from nni.utils import ClassArgsValidator

class FixedValidator(ClassArgsValidator):
    def validate_class_args(self, **kwargs):
        pass
"""


def _default_metric(job: dict[str, Any]) -> float:
    return float(_decoded(job["finalMetricData"][0])["default"])


def _log_sections(output: str) -> dict[str, list[str]]:
    """``log stdout|stderr`` output: the lines under each ``==> <path> <==`` header."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in output.splitlines():
        header = re.fullmatch(r"==> (.+) <==", line)
        if header:
            current = sections.setdefault(Path(header.group(1)).name, [])
        else:
            current.append(line)
    return sections


def cli_trial_ls(shared: Shared) -> None:
    table = shared.cli.ok("trial", "ls")  # the running experiment, without its id
    for job in shared.grid_trials():
        assert job["trialJobId"] in table
    assert "SUCCEEDED" in table


def cli_trial_ls_json(shared: Shared) -> None:
    listed = shared.cli.json("trial", "ls", shared.experiment_id, "--json")
    jobs = shared.jobs()
    assert [j["trialJobId"] for j in listed] == [j["trialJobId"] for j in jobs]
    for job in listed:
        assert NNICTL_DATE.match(job["startTime"]), job["startTime"]
        assert "endTime" not in job or NNICTL_DATE.match(job["endTime"])


def cli_trial_ls_head(shared: Shared) -> None:
    best = sorted(shared.succeeded(), key=_default_metric, reverse=True)[:2]
    listed = shared.cli.json("trial", "ls", "--head", "2", "--json")
    assert [j["trialJobId"] for j in listed] == [j["trialJobId"] for j in best]


def cli_trial_ls_tail(shared: Shared) -> None:
    worst = sorted(shared.succeeded(), key=_default_metric)[:2]
    listed = shared.cli.json("trial", "ls", shared.experiment_id, "--tail", "2", "--json")
    assert [j["trialJobId"] for j in listed] == [j["trialJobId"] for j in worst]


def cli_trial_kill(shared: Shared) -> None:
    held = shared.held_trial()
    shared.cli.ok("trial", "kill", "-T", held)  # the running experiment, without its id
    shared.wait_trial(held, "USER_CANCELED")
    held = shared.held_trial()
    shared.cli.ok("trial", "kill", shared.experiment_id, "--trial_id", held)
    shared.wait_trial(held, "USER_CANCELED")


def cli_experiment_show(shared: Shared) -> None:
    shown = shared.cli.json("experiment", "show")
    assert shown["id"] == shared.experiment_id and NNICTL_DATE.match(shown["startTime"])
    assert shown["params"] == shared.get("/experiment")["params"]


def cli_experiment_status(shared: Shared) -> None:
    assert shared.cli.json("experiment", "status", shared.experiment_id) == shared.get("/check-status")


def cli_experiment_list(shared: Shared) -> None:
    listed = shared.cli.ok("experiment", "list")
    row = next(line for line in listed.splitlines() if shared.experiment_id in line)
    assert "nni-surface" in row and "local" in row and str(shared.port) in row


def cli_experiment_export_json(shared: Shared) -> None:
    target = shared.root / "export.json"
    shared.cli.ok("experiment", "export", "--type", "json", "--filename", str(target))
    assert json.loads(target.read_text()) == shared.get("/export-data")


def cli_experiment_export_csv(shared: Shared) -> None:
    target = shared.root / "export.csv"
    shared.cli.ok("experiment", "export", shared.experiment_id, "-t", "csv", "-f", str(target))
    lines = target.read_text().splitlines()
    assert lines[0] == "x,default,loss,trialJobId"
    assert len(lines) == 1 + len(shared.get("/export-data"))


def cli_experiment_export_intermediate(shared: Shared) -> None:
    target = shared.root / "intermediate.json"
    shared.cli.ok("experiment", "export", "-t", "json", "-f", str(target), "--intermediate")
    exported = {r["trialJobId"]: r for r in json.loads(target.read_text())}
    for job in shared.grid_trials():
        x = _record(job)["parameters"]["x"]
        intermediate = [json.loads(value) for value in exported[job["trialJobId"]]["intermediate"]]
        assert intermediate == [x, {"default": x * 2, "epoch": 2}, x * 3]
    shared.cli.ok("experiment", "export", "-t", "json", "-f", str(target), "-i")
    assert json.loads(target.read_text())[0]["intermediate"]


def cli_experiment_import(shared: Shared) -> None:
    records = [
        {"parameter": {"x": 0.9}, "value": 0.9},
        {"parameter": {"x": 0.85}, "value": {"default": 0.85}},
    ]
    (shared.root / "import.json").write_text(json.dumps(records))
    shared.cli.ok("experiment", "import", "--filename", "import.json")
    assert json.loads(shared.get("/experiment/imported-data")[-1]) == records


def cli_config_show(shared: Shared) -> None:
    assert shared.cli.json("config", "show", shared.experiment_id) == shared.get("/experiment")["params"]


def cli_update_searchspace(shared: Shared) -> None:
    space = shared.add_to_space(0.6)
    (shared.root / "new_space.json").write_text(json.dumps(space))
    shared.cli.ok("update", "searchspace", "--filename", "new_space.json")
    assert shared.get("/experiment")["params"]["searchSpace"] == space
    shared.wait_for_x(0.6)


def cli_update_concurrency(shared: Shared) -> None:
    shared.cli.ok("update", "concurrency", shared.experiment_id, "--value", "4")
    assert shared.get("/experiment")["params"]["trialConcurrency"] == 4


def cli_update_duration(shared: Shared) -> None:
    shared.cli.ok("update", "duration", "-v", "2h")
    assert shared.get("/experiment")["params"]["maxExperimentDuration"] == 7200


def cli_update_trialnum(shared: Shared) -> None:
    shared.cli.ok("update", "trialnum", "-v", "40")
    assert shared.get("/experiment")["params"]["maxTrialNumber"] == 40


def cli_log_stdout(shared: Shared) -> None:
    log = shared.experiment_dir / "log" / "manager.log"
    head = _log_sections(shared.cli.ok("log", "stdout", "--head", "2"))["manager.log"]
    assert head == log.read_text().splitlines()[:2]
    tail = _log_sections(shared.cli.ok("log", "stdout", shared.experiment_id, "-T", "3"))["manager.log"]
    assert len(tail) == 3 and set(tail) <= set(log.read_text().splitlines())
    assert shared.cli.ok("log", "stdout", "--path").splitlines()[0] == str(log)


def cli_log_stderr(shared: Shared) -> None:
    log = shared.experiment_dir / "log" / "nnictl_stderr.log"
    sections = _log_sections(shared.cli.ok("log", "stderr", "-H", "5"))
    assert sections["nnictl_stderr.log"] == log.read_text().splitlines()[:5]
    assert shared.cli.ok("log", "stderr", shared.experiment_id, "--path").splitlines() == [str(log)]


def cli_log_trial(shared: Shared) -> None:
    job = shared.grid_trials()[0]
    line = f"id:{job['trialJobId']} path:{job['logPath']}"
    assert shared.cli.ok("log", "trial", "-T", job["trialJobId"]).splitlines() == [line]
    every = shared.cli.ok("log", "trial", shared.experiment_id).splitlines()
    assert line in every and len(every) == len(shared.jobs())


def cli_webui_url(shared: Shared) -> None:
    assert shared.cli.ok("webui", "url").strip() == f"Web UI url: http://127.0.0.1:{shared.port}"


def _interruptible() -> None:
    """In the child: SIGINT as a shell leaves it for a command, whatever this test process does with it (a child
    inherits an ignored or blocked SIGINT, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def cli_top(shared: Shared) -> None:
    top = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "top", "--time", "1"],
        cwd=shared.root,
        env={**shared.cli.env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    seen: list[str] = []
    try:
        trial_id = shared.grid_trials()[0]["trialJobId"]
        assert top.stdout is not None
        deadline = time.monotonic() + 60
        while not (trial_id in "".join(seen) and shared.experiment_id in "".join(seen)):
            assert time.monotonic() < deadline, "".join(seen)
            seen.append(top.stdout.readline())
    finally:
        top.send_signal(signal.SIGINT)
        _, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    assert f"Port: {shared.port}" in "".join(seen)


def cli_algo(shared: Shared) -> None:
    (shared.root / "algos").mkdir(exist_ok=True)
    (shared.root / "algos" / "fixed_tuner.py").write_text(CUSTOM_TUNER)
    meta = shared.root / "meta.yml"
    meta.write_text(
        "algoType: tuner\nbuiltinName: FixedTuner\nclassName: fixed_tuner.FixedTuner\n"
        "classArgsValidator: fixed_tuner.FixedValidator\n"
    )
    original = dict(shared.cli.env)
    shared.cli.env["PYTHONPATH"] = os.pathsep.join(
        [str(shared.root / "algos"), os.environ.get("PYTHONPATH", "")]
    )
    try:
        shared.cli.ok("algo", "register", "--meta_path", str(meta))
        listed = {row["name"]: row for row in shared.cli.json("algo", "list", "--json")}
        assert listed["FixedTuner"]["source"] == "user" and listed["TPE"]["source"] == "builtin"
        assert "FixedTuner" in shared.cli.ok("algo", "list")
        shown = shared.cli.json("algo", "show", "fixedtuner")
        assert (shown["className"], shown["classArgsValidator"]) == (
            "fixed_tuner.FixedTuner",
            "fixed_tuner.FixedValidator",
        )
        shared.cli.ok("algo", "unregister", "FixedTuner")
        assert shared.cli.run("algo", "show", "FixedTuner").returncode != 0
        shared.cli.ok("algo", "reg", "-m", str(meta))
        assert shared.cli.json("algo", "show", "FixedTuner")["source"] == "user"
        shared.cli.ok("algo", "unreg", "FixedTuner")
        assert "FixedTuner" not in shared.cli.ok("algo", "list")
    finally:
        shared.cli.env.clear()
        shared.cli.env.update(original)


def cli_version(shared: Shared) -> None:
    from trialfleet import __version__

    assert shared.cli.ok("--version").strip() == shared.cli.ok("-v").strip() == __version__


def cli_platforms(shared: Shared) -> None:
    described = {p["name"]: p["status"] for p in shared.cli.json("platforms", "--json")}
    assert {name: described[name] for name in ("local", "remote", "slurm")} == dict.fromkeys(
        ("local", "remote", "slurm"), "available"
    )


NNICTL: list[tuple[str, Callable[[Shared], None]]] = [
    ("trial ls", cli_trial_ls),
    ("trial ls --json", cli_trial_ls_json),
    ("trial ls --head", cli_trial_ls_head),
    ("trial ls --tail", cli_trial_ls_tail),
    ("trial kill --trial_id", cli_trial_kill),
    ("experiment show", cli_experiment_show),
    ("experiment status", cli_experiment_status),
    ("experiment list", cli_experiment_list),
    ("experiment export --type json", cli_experiment_export_json),
    ("experiment export --type csv", cli_experiment_export_csv),
    ("experiment export --intermediate", cli_experiment_export_intermediate),
    ("experiment import --filename", cli_experiment_import),
    ("config show", cli_config_show),
    ("update searchspace --filename", cli_update_searchspace),
    ("update concurrency --value", cli_update_concurrency),
    ("update duration --value", cli_update_duration),
    ("update trialnum --value", cli_update_trialnum),
    ("log stdout --head --tail --path", cli_log_stdout),
    ("log stderr --head --path", cli_log_stderr),
    ("log trial --trial_id", cli_log_trial),
    ("webui url", cli_webui_url),
    ("top --time", cli_top),
    ("algo register reg list show unregister unreg", cli_algo),
    ("--version", cli_version),
    ("platforms", cli_platforms),
]


@pytest.mark.parametrize("check", [c for _, c in NNICTL], ids=[name for name, _ in NNICTL])
def test_nnictl_command(shared: Shared, check: Callable[[Shared], None]) -> None:
    check(shared)


# ---- nni.experiment.Experiment: the methods, on the running experiment --------------------------------


def api_connect(shared: Shared, experiment: Any) -> None:
    assert (experiment.id, experiment.port) == (shared.experiment_id, shared.port)


def api_get_status(shared: Shared, experiment: Any) -> None:
    assert experiment.get_status() == shared.get("/check-status")["status"]


def api_list_trial_jobs(shared: Shared, experiment: Any) -> None:
    jobs = experiment.list_trial_jobs()
    assert [j.trialJobId for j in jobs] == [j["trialJobId"] for j in shared.jobs()]
    for job in jobs:
        assert (
            job.hyperParameters[0].parameters
            == _record(shared.get(f"/trial-jobs/{job.trialJobId}"))["parameters"]
        )


def api_get_trial_job(shared: Shared, experiment: Any) -> None:
    expected = shared.grid_trials()[0]
    job = experiment.get_trial_job(expected["trialJobId"])
    x = _record(expected)["parameters"]["x"]
    assert (job.status, job.sequenceId, job.logPath) == (
        "SUCCEEDED",
        expected["sequenceId"],
        expected["logPath"],
    )
    assert job.hyperParameters[0].parameters == {"x": x}
    assert job.finalMetricData[0].data == {"default": x, "loss": 1 - x}


def api_get_job_statistics(shared: Shared, experiment: Any) -> None:
    assert experiment.get_job_statistics() == shared.get("/job-statistics")


def api_get_job_metrics(shared: Shared, experiment: Any) -> None:
    job = shared.grid_trials()[0]
    x = _record(job)["parameters"]["x"]
    mine = experiment.get_job_metrics(job["trialJobId"])
    assert list(mine) == [job["trialJobId"]]
    assert [(m.type, m.sequence, m.data) for m in mine[job["trialJobId"]]] == [
        ("PERIODICAL", 0, x),
        ("PERIODICAL", 1, {"default": x * 2, "epoch": 2}),
        ("PERIODICAL", 10, x * 3),
        ("FINAL", 0, {"default": x, "loss": 1 - x}),
    ]
    assert {j["trialJobId"] for j in shared.grid_trials()} <= set(experiment.get_job_metrics())


def api_get_experiment_profile(shared: Shared, experiment: Any) -> None:
    profile = experiment.get_experiment_profile()
    assert profile["id"] == shared.experiment_id and profile["params"] == shared.get("/experiment")["params"]


def api_get_experiment_metadata(shared: Shared, experiment: Any) -> None:
    metadata = experiment.get_experiment_metadata(shared.experiment_id)
    assert (metadata["id"], metadata["port"], metadata["platform"]) == (
        shared.experiment_id,
        shared.port,
        "local",
    )


def api_get_all_experiments_metadata(shared: Shared, experiment: Any) -> None:
    assert shared.experiment_id in {m["id"] for m in experiment.get_all_experiments_metadata()}


def api_export_data(shared: Shared, experiment: Any) -> None:
    results = {r.trialJobId: r for r in experiment.export_data()}
    for job in shared.grid_trials():
        x = _record(job)["parameters"]["x"]
        result = results[job["trialJobId"]]
        assert (result.parameter, result.value) == ({"x": x}, {"default": x, "loss": 1 - x})


def api_update_trial_concurrency(shared: Shared, experiment: Any) -> None:
    experiment.update_trial_concurrency(2)
    assert shared.get("/experiment")["params"]["trialConcurrency"] == 2


def api_update_max_experiment_duration(shared: Shared, experiment: Any) -> None:
    experiment.update_max_experiment_duration("3h")
    assert shared.get("/experiment")["params"]["maxExperimentDuration"] == 10800


def api_update_search_space(shared: Shared, experiment: Any) -> None:
    space = shared.add_to_space(0.8)
    experiment.update_search_space(space)
    assert shared.get("/experiment")["params"]["searchSpace"] == space
    shared.wait_for_x(0.8)


def api_update_max_trial_number(shared: Shared, experiment: Any) -> None:
    experiment.update_max_trial_number(45)
    assert shared.get("/experiment")["params"]["maxTrialNumber"] == 45


def api_kill_trial_job(shared: Shared, experiment: Any) -> None:
    held = shared.held_trial()
    experiment.kill_trial_job(held)
    shared.wait_trial(held, "USER_CANCELED")


PYTHON_API: list[tuple[str, Callable[[Shared, Any], None]]] = [
    ("connect", api_connect),
    ("get_status", api_get_status),
    ("list_trial_jobs", api_list_trial_jobs),
    ("get_trial_job", api_get_trial_job),
    ("get_job_statistics", api_get_job_statistics),
    ("get_job_metrics", api_get_job_metrics),
    ("get_experiment_profile", api_get_experiment_profile),
    ("get_experiment_metadata", api_get_experiment_metadata),
    ("get_all_experiments_metadata", api_get_all_experiments_metadata),
    ("export_data", api_export_data),
    ("update_trial_concurrency", api_update_trial_concurrency),
    ("update_max_experiment_duration", api_update_max_experiment_duration),
    ("update_search_space", api_update_search_space),
    ("update_max_trial_number", api_update_max_trial_number),
    ("kill_trial_job", api_kill_trial_job),
]


@pytest.mark.parametrize("check", [c for _, c in PYTHON_API], ids=[name for name, _ in PYTHON_API])
def test_experiment_method(
    shared: Shared, check: Callable[[Shared, Any], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialfleet import Experiment

    monkeypatch.setenv("TRIALFLEET_HOME", shared.cli.env["TRIALFLEET_HOME"])
    check(shared, Experiment.connect(shared.port))


# ---- launch commands, through the life of a small experiment -------------------------------------------

SMALL_CONFIG = """\
experimentName: {name}
searchSpace: {{x: {{_type: choice, _value: [0.1, 0.2]}}}}
trialCommand: {python} trial.py
trialCodeDirectory: {code}
trialConcurrency: 2
maxTrialNumber: 2
experimentWorkingDirectory: {workdir}
tuner:
  name: GridSearch
trainingService:
  platform: local
"""
V1_CONFIG = """\
authorName: someone
experimentName: foreground
trialConcurrency: 2
maxTrialNum: 2
trainingServicePlatform: local
searchSpacePath: search_space.json
useAnnotation: false
logDir: {workdir}
tuner:
  builtinTunerName: GridSearch
trial:
  command: {python} trial.py
  codeDir: {code}
"""
DEBUG_LINE = re.compile(r"^\[[^]]+\] DEBUG \(", re.MULTILINE)


@dataclass
class Life:
    """The small experiment's state from row to row; ``elsewhere`` is a machine that never saw it."""

    cli: Cli
    elsewhere: Cli
    root: Path
    experiment_id: str = ""
    port: int = 0

    @property
    def workdir(self) -> Path:
        return self.root / "experiments"

    def status(self, cli: Cli | None = None) -> str:
        return str((cli or self.cli).json("experiment", "status", self.experiment_id)["status"])

    def listed(self, cli: Cli | None = None) -> dict[str, dict[str, Any]]:
        return {e["id"]: e for e in (cli or self.cli).json("experiment", "list", "--all", "--json")}

    def api(self, path: str, prefix: str = "") -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}{prefix}{API}{path}", timeout=30, trust_env=False)

    def nothing_left(self) -> None:
        wait_until(lambda: processes_mentioning(str(self.workdir)) == [], "no process of the experiment")


@pytest.fixture(scope="module")
def life(shared: Shared, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Life]:
    root = tmp_path_factory.mktemp("nni-life")
    (root / "life.yml").write_text(
        SMALL_CONFIG.format(
            name="life", python=sys.executable, code=shared.root / "code", workdir=root / "experiments"
        )
    )
    (root / "search_space.json").write_text(json.dumps(_space([0.1, 0.2])))
    (root / "foreground.yml").write_text(
        V1_CONFIG.format(python=sys.executable, code=shared.root / "code", workdir=root / "experiments")
    )
    (root / "elsewhere").mkdir()
    state = Life(Cli.in_dir(root), Cli.in_dir(root / "elsewhere"), root)
    try:
        yield state
    finally:
        state.cli.run("stop", "--all")
        state.elsewhere.run("stop", "--all")
        state.nothing_left()


def life_create(life: Life) -> None:
    life.port = free_port()
    out = life.cli.ok("create", "-c", "life.yml", "-p", str(life.port), "-d", "-u", "/life/")
    life.experiment_id = _experiment_id(out)
    assert f"Web portal URLs: http://127.0.0.1:{life.port}/life" in out
    assert f'To stop experiment run "trialfleet stop {life.experiment_id}"' in out
    assert life.api("/check-status", "/life").status_code == 200
    assert life.api("/check-status").status_code == 404  # outside the prefix
    wait_until(lambda: life.status() == "DONE", "the small experiment to be done")
    log = (life.workdir / life.experiment_id / "log" / "manager.log").read_text()
    assert DEBUG_LINE.search(log), log  # --debug
    assert (life.workdir / "_latest").resolve() == life.workdir / life.experiment_id


def life_stop_prefix(life: Life) -> None:
    out = life.cli.ok("stop", life.experiment_id[:4])
    assert f"Stopping experiment {life.experiment_id}" in out and "Stop experiment success." in out
    assert life.status() == "STOPPED"
    life.nothing_left()


def life_list_all(life: Life) -> None:
    assert life.experiment_id not in life.cli.ok("experiment", "list")
    entry = life.listed()[life.experiment_id]
    assert (entry["status"], entry["experimentName"]) == ("STOPPED", "life")
    assert life.experiment_id in life.cli.ok("experiment", "list", "--all")


def life_resume(life: Life) -> None:
    life.port = free_port()
    out = life.cli.ok("resume", life.experiment_id, "--port", str(life.port), "--debug")
    assert f"Experiment ID: {life.experiment_id}" in out and "Resumed:" in out
    assert life.api("/check-status").json()["status"] in ("RUNNING", "DONE")


def life_stop_pattern(life: Life) -> None:
    assert "Stop experiment success." in life.cli.ok("stop", life.experiment_id[:3] + "*")
    assert life.status() == "STOPPED"


def life_view(life: Life) -> None:
    life.port = free_port()
    life.cli.ok("view", life.experiment_id, "-p", str(life.port))
    assert life.status() == "VIEWED"
    assert len(life.api("/trial-jobs").json()) == 2
    refused = life.cli.run("update", "concurrency", "-v", "3")
    assert refused.returncode != 0 and "read-only" in refused.stderr


def life_stop_port(life: Life) -> None:
    assert "Stop experiment success." in life.cli.ok("stop", "--port", str(life.port))
    life.nothing_left()


def life_resume_foreground(life: Life) -> None:
    out = life.cli.ok("resume", life.experiment_id, "-p", str(free_port()), "-f")
    assert f"experiment {life.experiment_id}: DONE" in out
    assert life.status() == "DONE" and not life.listed()[life.experiment_id].get("port")


def life_resume_experiment_dir(life: Life) -> None:
    assert life.elsewhere.run("resume", life.experiment_id).returncode != 0  # not in this manifest
    life.port = free_port()
    life.elsewhere.ok("resume", life.experiment_id, "-e", str(life.workdir), "-p", str(life.port))
    assert life.status(life.elsewhere) in ("RUNNING", "DONE")


def life_delete_experiment(life: Life) -> None:
    response = httpx.delete(f"http://127.0.0.1:{life.port}{API}/experiment", timeout=30, trust_env=False)
    assert response.status_code == 200
    wait_until(lambda: not life.listed(life.elsewhere)[life.experiment_id].get("port"), "the manager to exit")
    life.nothing_left()


def life_view_experiment_dir(life: Life) -> None:
    life.port = free_port()
    life.elsewhere.ok(
        "view", life.experiment_id, "--experiment_dir", str(life.workdir), "--port", str(life.port)
    )
    assert life.status(life.elsewhere) == "VIEWED"


def life_stop(life: Life) -> None:
    assert "Stop experiment success." in life.elsewhere.ok("stop")  # the only running experiment there
    assert life.status(life.elsewhere) == "STOPPED"


def life_stop_all(life: Life) -> None:
    refused = life.cli.run("stop", "all")
    assert refused.returncode != 0 and "--all" in refused.stderr
    life.cli.ok("resume", life.experiment_id, "-p", str(free_port()))
    assert "Stop experiment success." in life.cli.ok("stop", "-a")
    assert life.status() == "STOPPED"
    life.nothing_left()


def life_create_foreground(life: Life) -> None:
    """A legacy v1 config, converted as it loads; its v2 form is printed between rulers, as nnictl does."""
    out = life.cli.ok("create", "--config", "foreground.yml", "--port", str(free_port()), "--foreground")
    experiment_id = _experiment_id(out)
    assert "legacy (v1) config" in out and "=" * 80 in out and "trialCommand:" in out
    assert f"experiment {experiment_id}: DONE" in out
    entry = life.listed()[experiment_id]
    assert entry["experimentName"] == "foreground" and not entry.get("port")
    assert [j["status"] for j in life.cli.json("trial", "ls", experiment_id, "--json")] == ["SUCCEEDED"] * 2


def life_delete(life: Life) -> None:
    deleted = subprocess.run(
        [str(CONSOLE_SCRIPT), "experiment", "delete", life.experiment_id],
        cwd=life.root,
        env=life.cli.env,
        input="y\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert deleted.returncode == 0, deleted.stderr
    assert not (life.workdir / life.experiment_id).exists()
    assert life.experiment_id not in life.listed()


def life_delete_all(life: Life) -> None:
    deleted = subprocess.run(
        [str(CONSOLE_SCRIPT), "experiment", "delete", "--all"],
        cwd=life.root,
        env=life.cli.env,
        input="y\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert deleted.returncode == 0, deleted.stderr
    assert life.listed() == {} and not any(p.name != "_latest" for p in life.workdir.iterdir())


LIFE: list[tuple[str, Callable[[Life], None]]] = [
    ("create --config --port --debug --url_prefix", life_create),
    ("stop id prefix", life_stop_prefix),
    ("experiment list --all", life_list_all),
    ("resume --port --debug", life_resume),
    ("stop id pattern", life_stop_pattern),
    ("view --port", life_view),
    ("stop --port", life_stop_port),
    ("resume --foreground", life_resume_foreground),
    ("resume --experiment_dir", life_resume_experiment_dir),
    ("DELETE /experiment", life_delete_experiment),
    ("view --experiment_dir", life_view_experiment_dir),
    ("stop without id", life_stop),
    ("stop -a", life_stop_all),
    ("create --foreground with a v1 config", life_create_foreground),
    ("experiment delete", life_delete),
    ("experiment delete --all", life_delete_all),
]


@pytest.mark.parametrize("step", [s for _, s in LIFE], ids=[name for name, _ in LIFE])
def test_launch_command(life: Life, step: Callable[[Life], None]) -> None:
    """The rows share one experiment and run in this order, each from where the previous one left it."""
    step(life)


# ---- nni.experiment.Experiment: starting, run modes, run_or_resume -------------------------------------

RUN_MODES = """
import json, sys
from trialfleet import Experiment, RunMode

started = {}
for mode, port in ((RunMode.Background, sys.argv[3]), (RunMode.Detach, sys.argv[4])):
    experiment = Experiment("local")
    experiment.config.trial_command = f"{sys.executable} trial.py"
    experiment.config.trial_code_directory = sys.argv[1]
    experiment.config.search_space = {"x": {"_type": "choice", "_value": [0.1]}}
    experiment.config.tuner.name = "GridSearch"
    experiment.config.trial_concurrency = 1
    experiment.config.experiment_working_directory = sys.argv[2]
    experiment.start(int(port), run_mode=mode)
    started[mode.name] = experiment.id
print(json.dumps(started))
"""


def test_run_modes_background_and_detach(shared: Shared, tmp_path: Path) -> None:
    """NNI's RunMode: Background stops the manager when the script exits, Detach leaves it running."""
    cli = Cli.in_dir(tmp_path)
    (tmp_path / "modes.py").write_text(RUN_MODES)
    ports = [free_port(), free_port()]
    run = subprocess.run(
        [
            sys.executable,
            "modes.py",
            str(shared.root / "code"),
            str(tmp_path / "experiments"),
            *map(str, ports),
        ],
        cwd=tmp_path,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    # the script's own line, among NNI's "[date] ..." life-cycle lines (the Background one's stop comes last)
    started = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("{")))
    try:
        listed = {e["id"]: e for e in cli.json("experiment", "list", "--all", "--json")}
        assert not listed[started["Background"]].get("port")
        assert listed[started["Detach"]]["port"] == ports[1]
        status = httpx.get(f"http://127.0.0.1:{ports[1]}{API}/check-status", timeout=30, trust_env=False)
        assert status.json()["status"] in ("RUNNING", "DONE")
    finally:
        cli.run("stop", "--all")
    wait_until(lambda: processes_mentioning(str(tmp_path / "experiments")) == [], "no process left")


def test_run_or_resume(shared: Shared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trialfleet import Experiment

    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))

    def experiment() -> Experiment:
        made = Experiment("local", id="run-or-resume")
        made.config.trial_command = f"{sys.executable} trial.py"
        made.config.trial_code_directory = shared.root / "code"
        made.config.search_space = _space([0.1, 0.2])
        made.config.tuner.name = "GridSearch"
        made.config.trial_concurrency = 2
        made.config.experiment_working_directory = tmp_path / "experiments"
        return made

    first = experiment()
    assert first.run_or_resume(free_port()) is True  # created and run to DONE
    trials = [job.trialJobId for job in first.list_trial_jobs()]
    first.stop()
    again = experiment()
    assert again.run_or_resume(free_port()) is True  # the same experiment, resumed
    try:
        assert [job.trialJobId for job in again.list_trial_jobs()] == trials and len(trials) == 2
    finally:
        again.stop()
    assert processes_mentioning(str(tmp_path / "experiments")) == []
