"""What NNI users' pipelines do, through the real console script: trials whose parameters are bare values
(NNI's BatchTuner), exported and listed as NNI shows them."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

from tests.integration.cli_harness import Cli, free_port

BARE_VALUES = [1, "a b", [2, 3], {"x": 0.5}, None]
TRIAL = """
import json, nni
p = nni.get_next_parameter()
print("got", json.dumps(p))
nni.report_final_result(len(json.dumps(p)))
"""


def test_batch_tuner_bare_values_reach_trials_as_given(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL)
    config = tmp_path / "config.yml"
    config.write_text(
        json.dumps(
            {
                "searchSpace": {"sets": {"_type": "choice", "_value": BARE_VALUES}},
                "trialCommand": f"{sys.executable} trial.py",
                "trialCodeDirectory": "code",
                "trialConcurrency": 2,
                "tuner": {"name": "BatchTuner"},
                "experimentWorkingDirectory": str(tmp_path / "exps"),
                "trainingService": {"platform": "local"},
            }
        )
    )
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()), "--foreground")
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    jobs = cli.json("trial", "ls", experiment_id, "--json")
    assert [j["status"] for j in jobs] == ["SUCCEEDED"] * len(BARE_VALUES)
    given = [json.loads(j["hyperParameters"][0])["parameters"] for j in jobs]
    assert given == BARE_VALUES
    assert [json.loads(j["finalMetricData"][0]["data"]) for j in jobs] == [
        str(len(json.dumps(value))) for value in BARE_VALUES
    ]
    cli.ok("experiment", "export", experiment_id, "--type", "csv", "--filename", "out.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out.csv").read_text())))
    bare = sorted((r["parameter"] for r in rows if r["parameter"]), key=str)
    assert bare == sorted((json.dumps(v) for v in BARE_VALUES if not isinstance(v, dict)), key=str)
    assert [r["x"] for r in rows if r["x"]] == ["0.5"]  # a dict's keys are columns, as before


def test_nni_layout_for_scripts_that_read_the_experiment_directory(tmp_path: Path) -> None:
    """TRIALFLEET_LAYOUT=nni: ~/nni-experiments/<id>/log/nnimanager.log with NNI's lines, dispatcher.log, and
    trial directories with trial.log and .nni/metrics."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "trial.py").write_text(TRIAL)
    config = tmp_path / "config.yml"
    config.write_text(
        json.dumps(
            {
                "searchSpace": {"sets": {"_type": "choice", "_value": [1, 2]}},
                "trialCommand": f"{sys.executable} trial.py",
                "trialCodeDirectory": "code",
                "trialConcurrency": 1,
                "tuner": {"name": "BatchTuner"},
                "trainingService": {"platform": "local"},
            }
        )
    )
    cli = Cli.in_dir(tmp_path)
    cli.env.update(HOME=str(tmp_path / "home"), TRIALFLEET_LAYOUT="nni")
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()), "--foreground")
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    root = tmp_path / "home" / "nni-experiments" / experiment_id
    manager_log = (root / "log" / "nnimanager.log").read_text()
    trial_ids = [j["trialJobId"] for j in cli.json("trial", "ls", experiment_id, "--json")]
    for trial_id in trial_ids:
        assert f"Trial job {trial_id} status changed from WAITING to RUNNING" in manager_log
        assert f"Trial job {trial_id} status changed from RUNNING to SUCCEEDED" in manager_log
        trial_dir = root / "trials" / trial_id
        assert (trial_dir / "trial.log").read_text().startswith("got ")
        assert (trial_dir / ".nni" / "metrics").read_bytes().startswith(b"ME")
    assert "Experiment done." in manager_log and "Starting experiment: " + experiment_id in manager_log
    assert "the tuner has no more trials" in (root / "log" / "dispatcher.log").read_text()
    assert not (root / "log" / "manager.log").exists()
    assert "Experiment done." in cli.ok("log", "stdout", experiment_id, "--tail", "20")
