"""``nnictl`` as an NNI user runs it: no variable set, HOME a scratch directory, an NNI v2 config naming GP and
Curvefitting, and the command lines of NNI's documentation; where NNI 3.0's own nnictl is built
(TRIALFLEET_REAL_NNI_PYTHON), its output for the same experiment is compared byte for byte."""

from __future__ import annotations

import concurrent.futures
import csv
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_harness import free_port, wait_until

ENTRY = "import sys; from trialfleet.cli.nnictl.entry import main; sys.exit(main())"
TRIAL = """
import nni
p = nni.get_next_parameter()
for epoch in range(1, 6):
    nni.report_intermediate_result(p["x"] * epoch / 5)
nni.report_final_result(p["x"] * p["y"])
"""
CONFIG = """\
experimentName: drop-in
searchSpace:
  x: {_type: uniform, _value: [0, 1]}
  y: {_type: choice, _value: [1, 2, 4]}
trialCommand: PYTHON trial.py
trialCodeDirectory: code
trialConcurrency: 2
maxTrialNumber: 5
tuner:
  name: GP
  classArgs: {optimize_mode: maximize, cold_start_num: 2}
assessor:
  name: Curvefitting
  classArgs: {epoch_num: 5, start_step: 2}
trainingService:
  platform: local
"""
LOGGED = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] (.*)$")


@dataclass
class Nnictl:
    cwd: Path
    env: dict[str, str]

    def run(self, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-c", ENTRY, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )

    def ok(self, *args: str) -> str:
        run = self.run(*args)
        assert run.returncode == 0, f"nnictl {' '.join(args)}: {run.returncode}\n{run.stdout}\n{run.stderr}"
        return run.stdout

    def status(self, experiment_id: str) -> str:
        return str(json.loads(self.ok("experiment", "status", experiment_id))["status"])


def logged(out: str) -> list[str]:
    """The messages of NNI's ``[date] message`` lines."""
    return [m.group(1) for m in map(LOGGED.match, out.splitlines()) if m]


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Nnictl, str, int]]:
    root = tmp_path_factory.mktemp("nnictl")
    (root / "code").mkdir()
    (root / "code" / "trial.py").write_text(TRIAL)
    (root / "config.yml").write_text(CONFIG.replace("PYTHON", sys.executable))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIALFLEET_", "NNI_"))}
    env.update(HOME=str(root / "home"), PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    nnictl = Nnictl(root, env)
    port = free_port()
    out = nnictl.ok("create", "--conf", "config.yml", "-p", str(port))  # argparse's abbreviation, as nnictl's
    experiment_id = re.search(r"Creating experiment, Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    assert logged(out) == [
        f"Creating experiment, Experiment ID: {experiment_id}",
        "Starting web server...",
        "Setting up...",
        f"Web portal URLs: http://127.0.0.1:{port}",
        f'To stop experiment run "nnictl stop {experiment_id}" or "nnictl stop --all"',
        "Reference: https://nni.readthedocs.io/en/stable/reference/nnictl.html",
    ]
    wait_until(lambda: nnictl.status(experiment_id) == "DONE", "the experiment to be DONE", timeout=240)
    yield nnictl, experiment_id, port
    nnictl.run("stop", "--all")


def test_create_runs_gp_and_curvefitting_to_done_in_nnis_layout(done: tuple[Nnictl, str, int]) -> None:
    nnictl, experiment_id, _ = done
    root = Path(nnictl.env["HOME"]) / "nni-experiments" / experiment_id
    manager_log = (root / "log" / "nnimanager.log").read_text()
    assert re.search(
        rf"^\[[\d\- :]{{19}}\] INFO \(NNIManager\) Starting experiment: {experiment_id}$", manager_log, re.M
    )
    assert re.search(r"^\[[\d\- :]{19}\] INFO \(NNIManager\) Experiment done\.$", manager_log, re.M)
    assert "Traceback" not in manager_log and "Traceback" not in (root / "log" / "dispatcher.log").read_text()
    jobs = json.loads(nnictl.ok("trial", "ls", experiment_id))
    assert len(jobs) == 5 and {j["status"] for j in jobs} <= {"SUCCEEDED", "EARLY_STOPPED"}
    assert all(re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d", j["startTime"]) for j in jobs)
    for job in jobs:
        assert (root / "trials" / job["trialJobId"]).is_dir()
    best = json.loads(nnictl.ok("trial", "ls", experiment_id, "--head", "2"))
    metrics = [float(json.loads(json.loads(j["finalMetricData"][0]["data"]))) for j in best]
    assert len(best) == 2 and metrics == sorted(metrics, reverse=True)


def test_outputs_are_nnictls(done: tuple[Nnictl, str, int], tmp_path: Path) -> None:
    nnictl, experiment_id, port = done
    listed = nnictl.ok("experiment", "list")
    assert listed.startswith("-" * 88 + "\n                Experiment information\n")
    assert re.search(
        rf"^Id: {experiment_id}    Name: drop-in    Status: DONE    Port: {port}    Platform: local    "
        r"StartTime: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d    EndTime: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$",
        listed,
        re.M,
    )
    show = nnictl.ok("experiment", "show", experiment_id)
    assert json.loads(show)["id"] == experiment_id and '"id":"' in show  # nnictl's separators
    nnictl.ok("experiment", "export", experiment_id, "--type", "csv", "--filename", str(tmp_path / "r.csv"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert rows and set(rows[0]) == {"x", "y", "reward", "trialJobId"}
    assert (
        nnictl.ok("experiment", "export", experiment_id, "-t", "json", "-f", str(tmp_path / "r.json"), "-i")
        == ""
    )
    assert all(len(r["intermediate"]) >= 1 for r in json.loads((tmp_path / "r.json").read_text()))
    (tmp_path / "prior.json").write_text(json.dumps([{"parameter": {"x": 0.5, "y": 2}, "value": 1.0}]))
    assert nnictl.ok("experiment", "import", experiment_id, "--filename", str(tmp_path / "prior.json")) == ""
    assert (
        nnictl.ok("update", "concurrency", experiment_id, "--value", "3")
        == "INFO:  Update concurrency success!\n"
    )
    assert nnictl.ok("update", "duration", experiment_id, "-v", "2h") == "INFO:  Update duration success!\n"
    (tmp_path / "space.json").write_text(json.dumps({"x": {"_type": "uniform", "_value": [0, 2]}}))
    out = nnictl.ok("update", "searchspace", experiment_id, "--filename", str(tmp_path / "space.json"))
    assert out == "INFO:  Update searchSpace success!\n"
    assert "Experiment done." in nnictl.ok("log", "stdout", experiment_id, "--tail", "20")
    trial_log = nnictl.ok("log", "trial", experiment_id).splitlines()
    assert trial_log[0] == "INFO:  All of trial log info:" and len(trial_log) == 6
    assert all(re.fullmatch(r"INFO:  id:\w+ path:local:/\S+", line) for line in trial_log[1:])


def _nni_manifest(nnictl: Nnictl, experiment_id: str) -> None:
    """NNI's own manifest entry for the experiment, as NNI's launcher writes it, from trialfleet's."""
    entry: dict[str, Any] = json.loads(
        (Path(nnictl.env["HOME"]) / ".trialfleet" / "experiments.json").read_text()
    )[experiment_id]
    nni = {
        k: entry[k] for k in ("experimentName", "port", "startTime", "endTime", "status", "platform", "pid")
    }
    nni.update(logDir=str(Path(nnictl.env["HOME"]) / "nni-experiments"), tag=[], prefixUrl=None)
    (Path(nnictl.env["HOME"]) / "nni-experiments" / ".experiment").write_text(
        json.dumps({experiment_id: nni})
    )


def test_byte_for_byte_what_nnis_own_nnictl_prints(done: tuple[Nnictl, str, int], tmp_path: Path) -> None:
    """NNI 3.0's nnictl reads the same experiment through NNI's REST routes (an entry in NNI's manifest points
    it at the manager), and prints exactly what trialfleet's nnictl prints."""
    python = os.environ.get("TRIALFLEET_REAL_NNI_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip("NNI 3.0's virtualenv is not built (scripts/test builds it; TRIALFLEET_REAL_NNI_PYTHON)")
    nnictl, experiment_id, _ = done
    if nnictl.status(experiment_id) != "DONE" or not json.loads(nnictl.ok("trial", "ls", experiment_id)):
        pytest.fail("the experiment is not served")  # the previous test stopped it: run this one first
    _nni_manifest(nnictl, experiment_id)
    real = Nnictl(nnictl.cwd, {**nnictl.env, "PYTHONPATH": ""})

    def theirs(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "nni.tools.nnictl.nnictl", *command], env=real.env, capture_output=True, text=True
        )

    reads = [
        ["trial", "ls"],
        ["trial", "ls", "--tail", "2"],
        ["experiment", "show"],
        ["experiment", "status"],
        ["experiment", "list", "--all"],
    ]
    exports = {kind: (tmp_path / f"ours.{kind}", tmp_path / f"nni.{kind}") for kind in ("json", "csv")}
    # NNI's nnictl takes seconds of CPU to start: its reads run side by side (they change nothing), the update
    # after them
    with concurrent.futures.ThreadPoolExecutor(len(reads) + len(exports)) as pool:
        answers = [pool.submit(theirs, *command) for command in reads]
        exported = [
            pool.submit(theirs, "experiment", "export", "-t", kind, "-f", str(nni_file))
            for kind, (_, nni_file) in exports.items()
        ]
    for command, answer in zip(
        [*reads, ["update", "trialnum", "--value", "5"]], [*answers, None], strict=True
    ):
        done = answer.result() if answer is not None else theirs(*command)
        assert done.returncode == 0, done.stderr
        assert nnictl.ok(*command) == done.stdout, command
    for (kind, (mine, nni_file)), export in zip(exports.items(), exported, strict=True):
        assert export.result().returncode == 0, export.result().stderr
        nnictl.ok("experiment", "export", "-t", kind, "-f", str(mine))
        assert _records(mine, kind) == _records(nni_file, kind)


def _records(path: Path, kind: str) -> Any:
    """An export's records (NNI writes the CSV's columns in a set's order, which varies between runs)."""
    text = path.read_text()
    return (
        json.loads(text)
        if kind == "json"
        else sorted(map(sorted, (r.items() for r in csv.DictReader(io.StringIO(text)))))
    )


def test_stop_view_resume_as_nnictl(done: tuple[Nnictl, str, int]) -> None:
    nnictl, experiment_id, _ = done
    assert (
        nnictl.ok("stop") == f"INFO:  Stopping experiment {experiment_id}\nINFO:  Stop experiment success.\n"
    )
    assert "There is no experiment running..." in nnictl.ok("experiment", "list")
    for command in ("view", "resume"):
        port = free_port()
        out = nnictl.ok(command, experiment_id, "--port", str(port))
        assert logged(out)[0] == f"Creating experiment, Experiment ID: {experiment_id}"
        assert f"Web portal URLs: http://127.0.0.1:{port}" in logged(out)
        assert nnictl.status(experiment_id) in ("VIEWED", "RUNNING", "NO_MORE_TRIAL", "DONE")
        assert nnictl.ok("stop", experiment_id).endswith("INFO:  Stop experiment success.\n")
    run = nnictl.run("stop")
    assert run.stdout.startswith("ERROR: ") and run.returncode != 0
