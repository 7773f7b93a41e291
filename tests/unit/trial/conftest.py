"""Fixtures: a prepared trial directory and a runner for real trial scripts (see trial_helpers)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from trial_helpers import PARAMETER_RECORD, TrialRun, trial_env


@pytest.fixture
def trial_dir(tmp_path: Path) -> Path:
    path = tmp_path / "exp42" / "trials" / "Tr1aL"
    path.mkdir(parents=True)
    (path / "parameter.cfg").write_text(json.dumps(PARAMETER_RECORD))
    return path


@pytest.fixture
def run_trial(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run a trial script (source text) as ``python script.py`` from a code directory."""
    code_dir = tmp_path / "code"
    code_dir.mkdir()

    def run(
        source: str,
        trial_dir: Path,
        *,
        env: dict[str, str] | None = None,
        python_args: tuple[str, ...] = (),
        timeout: float = 120,
    ) -> TrialRun:
        script = code_dir / "trial.py"
        script.write_text(textwrap.dedent(source))
        proc = subprocess.run(
            [sys.executable, *python_args, str(script)],
            cwd=code_dir,
            env=env if env is not None else trial_env(trial_dir),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return TrialRun(proc.returncode, proc.stdout, proc.stderr, trial_dir)

    return run
