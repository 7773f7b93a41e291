"""Stand-ins for Slurm's client commands in unit tests: scripts on PATH that answer from a scenario file.

Each command (``squeue``, ``sacct``, ``sbatch``, ``scontrol``, ``scancel``) records how it was called and prints
the answer scripted for it: a string (its stdout, exit 0) or ``{"out", "err", "code"}``. The real commands
run against a real Slurm in tests/integration/slurm.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

COMMANDS = ("squeue", "sacct", "sbatch", "scontrol", "scancel")

FAKE_COMMAND = """#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["FAKE_SLURM_CALLS"], "a") as f:
    f.write(json.dumps([name, *sys.argv[1:]]) + "\\n")
with open(os.environ["FAKE_SLURM_SCENARIO"]) as f:
    answer = json.load(f).get(name, "")
if isinstance(answer, str):
    answer = {{"out": answer}}
sys.stdout.write(answer.get("out", ""))
sys.stderr.write(answer.get("err", ""))
sys.exit(answer.get("code", 0))
"""


class FakeSlurm:
    def __init__(self, directory: Path, **answers: str | dict[str, Any]) -> None:
        self.bin = directory / "fake-slurm-bin"
        self.bin.mkdir()
        for name in COMMANDS:
            path = self.bin / name
            path.write_text(FAKE_COMMAND.format(python=sys.executable))
            path.chmod(0o755)
        self.scenario = directory / "fake-slurm-scenario.json"
        self.calls_file = directory / "fake-slurm-calls.jsonl"
        self.answers: dict[str, str | dict[str, Any]] = {}
        self.answer(**answers)
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "FAKE_SLURM_SCENARIO": str(self.scenario),
            "FAKE_SLURM_CALLS": str(self.calls_file),
        }

    def answer(self, **answers: str | dict[str, Any]) -> None:
        self.answers.update(answers)
        self.scenario.write_text(json.dumps(self.answers))

    def calls(self, command: str | None = None) -> list[list[str]]:
        if not self.calls_file.exists():
            return []
        calls = [json.loads(line) for line in self.calls_file.read_text().splitlines()]
        return [call for call in calls if command is None or call[0] == command]

    def asked_jobs(self) -> list[str]:
        """The --jobs argument of every squeue call so far."""
        return [
            arg.split("=", 1)[1] for call in self.calls("squeue") for arg in call if arg.startswith("--jobs=")
        ]
