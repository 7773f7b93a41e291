"""The two systems under test behind one interface: trialfleet's CLI and NNI's ``nnictl``.

Both are driven the same way (nnictl's command names, NNI's REST routes), from the same config file; only
the executable, the trial interpreter and how the manager process is recognised differ.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import procs

TRIALS_DIR = Path(__file__).resolve().parent / "trials"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Created:
    experiment_id: str
    port: int
    t_create: float  # wall clock just before the create command
    create_s: float  # how long the command itself took

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1/nni"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class CommandFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class System:
    name: str
    cli: tuple[str, ...]
    python: str  # the trials' interpreter
    env: dict[str, str]
    manager_needle: str  # in the manager's command line, next to the experiment id
    helper_needle: str | None = None  # a process of the manager's that does its work too (NNI's dispatcher)

    def run(self, *args: str, timeout: float = 300) -> tuple[int, str]:
        done = subprocess.run(
            [*self.cli, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        return done.returncode, _ANSI.sub("", done.stdout + done.stderr)

    def create(self, config: Path, port: int | None = None) -> Created:
        port = port or free_port()
        t0 = time.time()
        code, out = self.run("create", "--config", str(config), "--port", str(port))
        found = re.search(r"Experiment ID:\s*(\S+)", out)
        if code != 0 or found is None:
            raise CommandFailed(f"{self.name} create failed (exit {code}):\n{out[-3000:]}")
        return Created(found.group(1), port, t0, time.time() - t0)

    def resume(self, experiment_id: str, port: int, experiment_dir: Path) -> float:
        t0 = time.time()
        code, out = self.run(
            "resume", experiment_id, "--port", str(port), "--experiment_dir", str(experiment_dir)
        )
        if code != 0:
            raise CommandFailed(f"{self.name} resume failed (exit {code}):\n{out[-3000:]}")
        return time.time() - t0

    def manager_pid(self, experiment_id: str) -> int | None:
        return procs.find_process(self.manager_needle, experiment_id)

    def manager_pids(self, experiment_id: str) -> list[int]:
        """The manager and its helper processes, for RSS and CPU (raises if no manager runs)."""
        pid = self.manager_pid(experiment_id)
        if pid is None:
            raise RuntimeError(f"no {self.name} manager process for {experiment_id}")
        needle = self.helper_needle
        helpers = [p for p in procs.descendants(pid) if needle and needle in f" {procs.cmdline(p)} "]
        return [pid, *helpers]

    def stop(self, experiment_id: str, timeout: float = 90) -> None:
        """Stop by the CLI; a manager still alive after ``timeout`` is killed by its pid."""
        pid = self.manager_pid(experiment_id)
        self.run("stop", experiment_id, timeout=timeout + 30)
        deadline = time.monotonic() + timeout
        while pid and procs.alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid and procs.alive(pid):
            print(f"!! {self.name} manager {pid} still alive after stop; SIGKILL", file=sys.stderr)
            os.kill(pid, signal.SIGKILL)

    def write_experiment(
        self,
        directory: Path,
        script: str,
        *,
        trials: int,
        concurrency: int,
        env: dict[str, str] | None = None,
        training_service: dict[str, object] | None = None,
        python: str | None = None,
    ) -> Path:
        """An experiment directory with the trial script, the search space and ``config.yml``."""
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copy(TRIALS_DIR / script, directory)
        shutil.copy(TRIALS_DIR / "search_space.json", directory)
        prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
        config = {
            "experimentName": f"bench-{directory.name}",
            "searchSpaceFile": "search_space.json",
            "trialCommand": f"{prefix}{shlex.quote(python or self.python)} {script}",
            "trialCodeDirectory": ".",
            "trialConcurrency": concurrency,
            "maxTrialNumber": trials,
            "experimentWorkingDirectory": str(directory / "experiments"),
            "tuner": {"name": "Random"},
            "trainingService": training_service or {"platform": "local"},
        }
        path = directory / "config.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML, and both systems read YAML
        return path


def _clean_env(extra_path: str | None = None) -> dict[str, str]:
    # an inherited NNI trial context would send the systems' own trials to the wrong channel
    env = {k: v for k, v in os.environ.items() if not k.startswith("NNI_")}
    if extra_path:
        env["PATH"] = extra_path + os.pathsep + env.get("PATH", "")
    return env


def trialfleet(home: Path) -> System:
    """trialfleet from this interpreter's installation, with a private experiments manifest under ``home``."""
    bin_dir = Path(sys.executable).parent
    script = bin_dir / "trialfleet"
    cli = (
        (str(script),)
        if script.exists()
        # what the console script runs: its manager's process is started before the CLI's imports, and its exit
        # status is the command's
        else (sys.executable, "-c", "import sys; from trialfleet.cli.entry import main; sys.exit(main())")
    )
    env = _clean_env(str(bin_dir))
    env["TRIALFLEET_HOME"] = str(home)
    return System("trialfleet", cli, sys.executable, env, "trialfleet.manager")


def nni(venv: Path) -> System:
    """NNI from a virtualenv holding ``nni`` (its nnictl, its python for the trials)."""
    bin_dir = venv / "bin"
    nnictl = bin_dir / "nnictl"
    if not nnictl.exists():
        raise FileNotFoundError(f"no nnictl in {bin_dir} (NNI 3.0: pip install nni==3.0 into {venv})")
    return System(
        "nni", (str(nnictl),), str(bin_dir / "python"), _clean_env(str(bin_dir)), "main.js", " -m nni "
    )
