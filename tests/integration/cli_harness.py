"""Running the real ``trialfleet`` console script in a scratch directory, and looking for leftover processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONSOLE_SCRIPT = Path(sys.executable).parent / "trialfleet"

TRIAL_SCRIPT = """
import os, sys, time
import nni

params = nni.get_next_parameter()
print("trial", nni.get_trial_id(), "got", params)
for step in range(3):
    nni.report_intermediate_result(params["x"] * (step + 1) / 3)
hold = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")
deadline = time.time() + 120
while os.path.exists(hold) and time.time() < deadline:
    time.sleep(0.05)
nni.report_final_result({"default": params["x"], "loss": 1 - params["x"]})
"""

CONFIG = """\
experimentName: cli-e2e
searchSpaceFile: search_space.json
trialCommand: {python} trial.py
trialCodeDirectory: code
trialConcurrency: 4
maxTrialNumber: 6
experimentWorkingDirectory: {workdir}
tuner:
  name: Random
  classArgs:
    optimize_mode: maximize
trainingService:
  platform: local
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cli:
    """``trialfleet`` with its own TRIALFLEET_HOME and working directory."""

    cwd: Path
    env: dict[str, str]

    @classmethod
    def in_dir(cls, root: Path) -> Cli:
        assert CONSOLE_SCRIPT.is_file(), f"the trialfleet console script is not installed at {CONSOLE_SCRIPT}"
        env = {
            **os.environ,
            "TRIALFLEET_HOME": str(root / "home"),
            "TRIALFLEET_CONFIG_DIR": str(root / "cfg"),
        }
        env.pop("TRIALFLEET_DEBUG", None)
        return cls(root, env)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CONSOLE_SCRIPT), *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, (
            f"trialfleet {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
        )
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args))


def write_experiment(root: Path, *, hold: bool) -> Path:
    """An NNI-style experiment (the trial does ``import nni``); returns the config file."""
    code = root / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "trial.py").write_text(TRIAL_SCRIPT)
    if hold:
        (code / "hold").touch()
    (root / "search_space.json").write_text(json.dumps({"x": {"_type": "uniform", "_value": [0, 1]}}))
    config = root / "config.yml"
    config.write_text(CONFIG.format(python=sys.executable, workdir=root / "experiments"))
    return config


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def kill_manager_and_resume(cli: Cli, experiment_id: str) -> str:
    """SIGKILL the manager of the one experiment listed, once it is gone resume it; what ``resume`` printed."""
    manager = cli.json("experiment", "list", "--json")[0]["pid"]
    os.kill(manager, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{manager}").exists(), "the killed manager to be reaped")
    return cli.ok("resume", experiment_id, "--port", str(free_port()))


def wait_done_and_stop(cli: Cli, experiment_id: str, timeout: float = 120) -> None:
    wait_until(
        lambda: cli.json("experiment", "status", experiment_id)["status"] == "DONE", "DONE", timeout=timeout
    )
    cli.ok("stop", experiment_id)


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line, working directory or environment mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            continue
        if text in cmdline or text in cwd or text in environ:
            found.append((int(entry.name), cmdline))
    return found
