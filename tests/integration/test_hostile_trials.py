"""A trial's output never takes the manager down: hostile metric values through the real SDK and raw records
are the trial's problems (logged, shown on the trial), the experiment goes on and can be resumed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.integration.cli_harness import Cli, free_port

HOSTILE_TRIAL = r"""
import json, os, nni
nni.get_next_parameter()
nni.report_intermediate_result(10 ** 400)                 # the SDK accepts it; no float holds it
deep = 0
for _ in range(500):
    deep = [deep]
nni.report_intermediate_result({"default": 1, "deep": deep})
metrics = open(os.path.join(os.environ["NNI_SYS_DIR"], ".nni", "metrics"), "ab")
def frame(record):
    payload = (json.dumps(record) + "\n").encode()
    metrics.write(b"ME%06d" % len(payload) + payload)
frame({"type": "PERIODICAL", "sequence": 2 ** 63, "parameter_id": 0, "value": "1"})
frame({"type": "PERIODICAL", "sequence": 5, "parameter_id": 2 ** 64, "value": "1"})
frame({"type": "PERIODICAL", "sequence": 6, "parameter_id": 0, "value": "[" * 5000 + "]" * 5000})
metrics.write(b"ME000012" + b"[" * 11 + b"\n")
metrics.flush()
nni.report_final_result(0.5)
"""


def test_hostile_metric_values_are_problems_and_the_manager_lives(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(HOSTILE_TRIAL)
    config = tmp_path / "config.yml"
    config.write_text(
        "searchSpace: {x: {_type: choice, _value: [1, 2]}}\n"
        f"trialCommand: {sys.executable} trial.py\ntrialCodeDirectory: code\ntrialConcurrency: 2\n"
        f"tuner: {{name: GridSearch}}\nexperimentWorkingDirectory: {tmp_path / 'exps'}\n"
        "trainingService: {platform: local}\n"
    )
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()), "--foreground")
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    assert f"experiment {experiment_id}: DONE" in out
    jobs = cli.json("trial", "ls", experiment_id, "--json")
    assert [j["status"] for j in jobs] == ["SUCCEEDED", "SUCCEEDED"]
    assert all(j["finalMetricData"][0]["data"] == '"0.5"' for j in jobs)
    log = (tmp_path / "exps" / experiment_id / "log" / "manager.log").read_text()
    for problem in (
        "metric is too large for a number",
        "nested more than 32 levels deep",
        "metric sequence 9223372036854775808 is not an integer from 0 to",
        "metric parameter_id 18446744073709551616 is not an integer",
        "nested too deeply to read",
        "metric record is not JSON",
    ):
        assert log.count(problem) == 2, problem  # once per trial, logged; the trial went on
    resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))
    assert "Resumed" in resumed
    cli.ok("stop", experiment_id)
