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
