"""docs/slurm.md's "Try it" commands, read from the page and run as written (from the checkout root, in a
shell) on the test cluster: page and test cannot drift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

from tests.integration.try_it import try_it_commands

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[3]


def test_the_slurm_page_try_it_runs_as_written(tmp_path: Path, slurm_cluster: SlurmCluster) -> None:
    commands = try_it_commands(ROOT / "docs" / "slurm.md")
    assert commands[-1] == "trialfleet create --config examples/slurm/config.yml --foreground"
    env = {
        **slurm_cluster.env,
        "HOME": str(tmp_path),  # ~/trialfleet-shared and ~/trialfleet-experiments land here
        "TRIALFLEET_HOME": str(tmp_path / "home"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{slurm_cluster.env.get('PATH', '')}",
    }
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    assert "DONE" in done.stdout and "trials: succeeded 20" in done.stdout, done.stdout
    assert len(list((tmp_path / "trialfleet-shared").glob("*/trials/*"))) == 20
