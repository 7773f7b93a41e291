"""examples/aml run to the end through the real ``trialfleet`` CLI against the Azure ML emulator.

``config_aml.yml`` is NNI's own Azure ML example (v2), ``config_aml_v1.yml`` its legacy form. Only what points
at a workspace changes: the four placeholders, and the cloud — the emulator is a cloud of its own, named and
described with ``cloud`` / ``cloudMetadata`` as a sovereign or private cloud would be. Credentials come from
azure-identity's default chain (its ``AZURE_*`` variables), the CA bundle and proxy from the environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.emulators.aml import AmlEmulator
from tests.integration.cli_harness import Cli, free_port
from trialfleet.training_services.aml.job import job_name

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "aml"
WORKTREE = str(Path(__file__).resolve().parents[3])


def point_at(aml: AmlEmulator, text: str) -> str:
    c = aml.config
    for placeholder, value in (
        ("subscriptionId", c.subscription_id),
        ("resourceGroup", c.resource_group),
        ("workspaceName", c.workspace_name),
        ("computeTarget", c.computes[0]),
    ):
        text = text.replace(f"${{replace_to_your_{placeholder}}}", value)
    return text


def cloud(aml: AmlEmulator) -> dict[str, Any]:
    return {"cloud": aml.cloud_name, "cloudMetadata": aml.cloud_metadata, "disableInstanceDiscovery": True}


@pytest.mark.parametrize(
    ("config_name", "block"), [("config_aml.yml", "trainingService"), ("config_aml_v1.yml", "amlConfig")]
)
def test_nnis_example_runs_to_the_end(tmp_path: Path, aml: AmlEmulator, config_name: str, block: str) -> None:
    code = tmp_path / "example"
    shutil.copytree(EXAMPLE, code)
    data = yaml.safe_load(point_at(aml, (code / config_name).read_text()))
    data[block].update(cloud(aml))
    data["experimentWorkingDirectory" if block == "trainingService" else "logDir"] = str(
        tmp_path / "experiments"
    )
    (code / config_name).write_text(yaml.safe_dump(data))
    cli = Cli.in_dir(tmp_path)
    cli.env["PYTHONPATH"] = os.environ.get("PYTHONPATH", WORKTREE)
    run = cli.run("create", "--config", str(code / config_name), "--foreground", "--port", str(free_port()))
    assert run.returncode == 0, run.stderr
    # nothing of the SDK's own chatter: its "experimental class" lines and the upload's bare colour reset
    assert "experimental class" not in run.stderr and "\x1b[" not in run.stderr, run.stderr
    out = run.stdout
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    trials = cli.json("trial", "ls", experiment_id, "--json")
    assert [t["status"] for t in trials] == ["SUCCEEDED"] * 10, trials
    for trial in trials:
        final = json.loads(json.loads(trial["finalMetricData"][0]["data"]))
        assert final["default"] > 0.5
    # NNI's AML mode (reuse, the default): one trial at a time, all ten in the one worker job, released at the end
    jobs = {job["name"]: job for job in aml.job_states()}
    assert [name.startswith(f"nni_exp_{experiment_id}_worker_") for name in jobs] == [True], sorted(jobs)
    assert not any(
        name.startswith(job_name(experiment_id, t["trialJobId"], 0)) for t in trials for name in jobs
    )
    assert {job["status"] for job in jobs.values()} == {"Completed"}
    uploads = [r for r in aml.requests() if r.method == "POST" and r.path.endswith("/startPendingUpload")]
    assert len(uploads) == 1  # the code snapshot was uploaded once
