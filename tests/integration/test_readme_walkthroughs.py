"""The README's walkthroughs, run as written on the shipped examples (timings are measured in bench/, not
here): the quickstart, and the reliability session — kill -9 of the manager, resume, nothing re-run or lost."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.integration.cli_harness import Cli, free_port, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _user(tmp_path: Path) -> Cli:
    """A user whose home is the test's directory (the examples use the default experiment directory)."""
    cli = Cli.in_dir(tmp_path)
    cli.env["HOME"] = str(tmp_path / "home")
    return cli


def test_the_quickstart_as_written(tmp_path: Path) -> None:
    cli = _user(tmp_path)
    config = EXAMPLES / "quickstart" / "config.yml"
    out = cli.ok("create", "--config", str(config), "--foreground", "--port", str(free_port()))
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    assert "best trials (minimize)" in out and f"experiment {experiment_id}: DONE" in out
    statuses = [t["status"] for t in cli.json("trial", "ls", experiment_id, "--json")]
    assert statuses == ["SUCCEEDED"] * 24


def test_the_reliability_session_as_written(tmp_path: Path) -> None:
    code = tmp_path / "nni-style"
    shutil.copytree(EXAMPLES / "nni-style", code)
    cli = _user(tmp_path)
    port = free_port()
    out = cli.ok("create", "--config", str(code / "config.yml"), "--port", str(port))
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]

    def trials() -> list[dict[str, object]]:
        return list(cli.json("trial", "ls", experiment_id, "--json"))

    wait_until(lambda: [t["status"] for t in trials()] == ["RUNNING"] * 4, "four running trials")
    before = {t["trialJobId"]: t["startTime"] for t in trials()}
    os.kill(cli.json("experiment", "list", "--json")[0]["pid"], signal.SIGKILL)
    wait_until(lambda: cli.json("experiment", "list", "--all", "--json")[0]["status"] == "STOPPED", "STOPPED")
    resumed = cli.ok("resume", experiment_id, "--port", str(port))
    assert (
        "Resumed: 4 running trial(s) re-adopted, 0 stopped trial(s) re-run, 0 waiting trial(s) queued"
        in resumed
    )
    wait_until(
        lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE", timeout=180
    )
    after = trials()
    assert {t["trialJobId"]: t["startTime"] for t in after[:4]} == before  # the same trials, not re-run
    # every epoch's result of the four trials that ran through the kill, none twice: Medianstop may still
    # stop one of them early on its last epoch, which it reports just before its final result
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/nni/metric-data") as response:
        metrics = json.load(response)
    for trial_id in before:
        epochs = [m["sequence"] for m in metrics if m["trialJobId"] == trial_id and m["type"] == "PERIODICAL"]
        assert sorted(epochs) == [0, 1, 2, 3, 4], trial_id
    cli.ok("stop")
    cli.ok(
        "experiment",
        "export",
        experiment_id,
        "--type",
        "json",
        "--filename",
        "results.json",
        "--intermediate",
    )
    exported = json.loads((tmp_path / "results.json").read_text())
    succeeded = {t["trialJobId"] for t in after if t["status"] == "SUCCEEDED"}  # NNI exports only those
    assert {r["trialJobId"] for r in exported} == succeeded and succeeded & set(before)
    assert all(len(r["intermediate"]) == 5 for r in exported if r["trialJobId"] in before)


def test_the_python_api_example_as_written(tmp_path: Path) -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "experiment.run(8080)" in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("experiment.run(8080)", f"experiment.run({free_port()})"))
    cli = _user(tmp_path)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=EXAMPLES.parent,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # NNI's Experiment prints its life cycle as "[date] message" lines around what the script prints
    logged = [line for line in done.stdout.splitlines() if re.match(r"\[\d{4}-\d\d-\d\d ", line)]
    printed = [line for line in done.stdout.splitlines() if line not in logged]
    assert printed[0].startswith("TrialResult(parameter={'lr': ") and len(printed) == 1
    assert any("Web portal URLs: http://127.0.0.1:" in line for line in logged)
