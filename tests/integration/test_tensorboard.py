"""``trialfleet tensorboard start|stop`` (nnictl's) and NNI's /tensorboard routes on a real local experiment whose
trials write TensorBoard event files to NNI_OUTPUT_DIR/tensorboard (with the ``tensorboard`` package's own writer).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until
from trialfleet.tensorboard import installed

pytestmark = pytest.mark.slow

TRIAL = """
import os, time
import nni
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

params = nni.get_next_parameter()
writer = EventFileWriter(os.path.join(os.environ["NNI_OUTPUT_DIR"], "tensorboard"))
for step in range(3):
    value = summary_pb2.Summary.Value(tag="loss", simple_value=params["x"] / (step + 1))
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])))
writer.close()
nni.report_final_result(params["x"])
"""

CONFIG = """
experimentName: tensorboard
searchSpace: {{x: {{_type: uniform, _value: [0, 1]}}}}
trialCommand: {python} trial.py
trialCodeDirectory: {code}
trialConcurrency: 2
maxTrialNumber: 2
tuner: {{name: Random}}
experimentWorkingDirectory: {workdir}
trainingService: {{platform: local}}
"""


def test_tensorboard_serves_the_chosen_trials_and_stops(tmp_path: Path) -> None:
    if not installed():
        pytest.fail("TensorBoard is a test dependency: pip install -e '.[test]' (the tensorboard extra)")
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(TRIAL)
    config = tmp_path / "config.yml"
    config.write_text(CONFIG.format(python=sys.executable, code=code, workdir=tmp_path / "experiments"))
    cli = Cli.in_dir(tmp_path)
    port = free_port()
    created = cli.ok("create", "--config", str(config), "--port", str(port))
    experiment_id = re.search(r"Experiment ID: (\w+)", created).group(1)  # type: ignore[union-attr]
    try:
        wait_until(
            lambda: (
                [j["status"] for j in cli.json("trial", "ls", experiment_id, "--json")] == ["SUCCEEDED"] * 2
            ),
            "both trials to succeed",
        )
        jobs = cli.json("trial", "ls", experiment_id, "--json")
        ids = [j["trialJobId"] for j in jobs]

        refused = cli.run("tensorboard", "start", experiment_id)
        assert refused.returncode != 0 and "--trial_id" in refused.stderr  # two trials: which?

        board = free_port()
        out = cli.ok("tensorboard", "start", experiment_id, "-T", ",".join(ids), "--port", str(board))
        assert f"http://127.0.0.1:{board}" in out
        runs = httpx.get(f"http://127.0.0.1:{board}/data/runs", timeout=30).json()
        # one run per trial, named <Trial No.>-<trial id> (TensorBoard adds the event files' folder: "/.")
        assert sorted(r.removesuffix("/.") for r in runs) == sorted(
            f"{j['sequenceId']}-{j['trialJobId']}" for j in jobs
        )

        api = f"http://127.0.0.1:{port}/api/v1/nni"
        (task,) = httpx.get(f"{api}/tensorboard-tasks").json()
        assert task["status"] == "RUNNING" and sorted(task["trialJobIdList"]) == sorted(ids)
        assert all(d.endswith("/tensorboard") for d in task["trialLogDirectoryList"])
        again = httpx.post(f"{api}/tensorboard", json={"trials": ",".join(reversed(ids))}).json()
        assert again["id"] == task["id"]  # the same trials: the running task is reused, as NNI does
        missing = httpx.post(f"{api}/tensorboard", json={"trials": "nosuchtrial"})
        assert missing.status_code == 400 and "nosuchtrial" in missing.json()["error"]

        assert "Stop tensorboard success!" in cli.ok("tensorboard", "stop", experiment_id)
        wait_until(lambda: not processes_mentioning(f"--port {board}"), "TensorBoard to end")
        assert httpx.get(f"{api}/tensorboard/{task['id']}").json()["status"] == "STOPPED"
    finally:
        cli.run("stop", experiment_id)
