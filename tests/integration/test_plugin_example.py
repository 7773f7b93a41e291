"""The example platform plugin (examples/plugin) as a user installs and runs it: listed by ``trialfleet
platforms``, an experiment on ``platform: pinned`` run to the end, and resumed after its manager was killed.

scripts/test installs the plugin (``pip install -e examples/plugin``); its own tests run trialfleet's shipped
contract suite on it (examples/plugin/tests).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from pathlib import Path

from tests.integration.cli_harness import Cli, free_port, processes_mentioning, wait_until

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugin"
HELD_TRIAL = """
import os, time
import nni

params = nni.get_next_parameter()
hold = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")
while os.path.exists(hold):
    time.sleep(0.05)
print("pinned to CPU set", os.environ["PINNED_CPU_SET"])
nni.report_final_result(params["x"])
"""


def _experiment(tmp_path: Path, trial: str | None = None) -> Path:
    code = tmp_path / "experiment"
    shutil.copytree(PLUGIN / "experiment", code)
    if trial is not None:
        (code / "trial.py").write_text(trial)
    config = code / "config.yml"
    text = config.read_text().replace("python3 trial.py", f"{sys.executable} trial.py")
    config.write_text(text + f"experimentWorkingDirectory: {tmp_path / 'experiments'}\n")
    return config


def _trials(cli: Cli, experiment_id: str) -> list[dict[str, object]]:
    return list(cli.json("trial", "ls", experiment_id, "--json"))


def test_the_readme_installs_what_its_commands_run() -> None:
    """Each ``python -m X`` of the README's commands runs in the environment its own install line makes."""
    readme = (PLUGIN / "README.md").read_text()
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    install = re.search(r"pip install -e '(examples/plugin)\[(\w+)\]'", block)
    assert install, "the README installs the plugin with an extra that carries what its tests need"
    pyproject = (PLUGIN / "pyproject.toml").read_text()
    extra = re.search(rf"^{install.group(2)} = \[(.*)\]$", pyproject, re.M)
    assert extra, f"examples/plugin/pyproject.toml has no extra {install.group(2)!r}"
    needed = {"pytest", "pytest-asyncio"}  # the contract suite's tests are async (trialfleet.testing)
    named = set(re.findall(r'"([A-Za-z0-9_.-]+)', extra.group(1)))
    assert needed <= named and set(re.findall(r"python -m (\w+)", block)) <= {"pytest"}


def test_the_plugin_is_listed_with_its_version(tmp_path: Path) -> None:
    listed = {p["name"]: p for p in Cli.in_dir(tmp_path).json("platforms", "--json")}
    assert "pinned" in listed, "the example plugin is not installed: pip install -e 'examples/plugin[test]'"
    assert listed["pinned"]["status"] == "available"
    assert listed["pinned"]["source"] == "trialfleet-pinned 0.1.0"
    assert listed["local"]["status"] == "available" and listed["dlc"]["status"].startswith("config only")


def test_an_experiment_on_the_plugin_runs_to_the_end(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    out = cli.ok("create", "--config", str(_experiment(tmp_path)), "--port", str(free_port()), "--foreground")
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    trials = _trials(cli, experiment_id)
    assert [t["status"] for t in trials] == ["SUCCEEDED"] * 6
    listed = cli.ok("log", "trial", experiment_id, "--trial_id", str(trials[0]["trialJobId"]))
    trial_dir = Path(listed.split("path:local:", 1)[1].strip())
    assert (trial_dir / "trial.stdout").read_text() == "pinned to CPU set 0\n"


def test_a_killed_manager_is_resumed_and_its_pinned_trials_readopted(tmp_path: Path) -> None:
    cli = Cli.in_dir(tmp_path)
    config = _experiment(tmp_path, HELD_TRIAL)
    (config.parent / "hold").touch()
    out = cli.ok("create", "--config", str(config), "--port", str(free_port()))
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    running = lambda: [t for t in _trials(cli, experiment_id) if t["status"] == "RUNNING"]  # noqa: E731
    wait_until(lambda: len(running()) == 2, "both CPU sets in use")
    manager = cli.json("experiment", "list", "--json")[0]["pid"]
    os.kill(manager, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{manager}").exists(), "the killed manager to be reaped")
    resumed = cli.ok("resume", experiment_id, "--port", str(free_port()))
    assert "2 running trial(s) re-adopted" in resumed
    (config.parent / "hold").unlink()
    wait_until(lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE")
    assert [t["status"] for t in _trials(cli, experiment_id)] == ["SUCCEEDED"] * 6
    cli.ok("stop", experiment_id)
    assert processes_mentioning(f"NNI_EXP_ID={experiment_id}") == []
