"""docs/ray.md's "Trying it", read from the page and run as written from the checkout root: two nodes started in
PID namespaces of their own, the example run, its jobs listed, the cluster stopped — with nothing of it left."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from ray_cluster import ENV, STARTING_NICENESS

from tests.integration.try_it import ROOT, run_as_written, try_it_steps, user_env

pytestmark = [pytest.mark.ray, pytest.mark.netns]  # the page's fixed ports, in a network of the test's own


@pytest.mark.timeout(900)
def test_the_ray_page_try_it_runs_as_written(tmp_path: Path) -> None:
    temp_dir = tempfile.mkdtemp(prefix="ray-try-it-")
    steps = try_it_steps(ROOT / "docs" / "ray.md", "## Trying it")
    commands = [step.command for step in steps]
    assert commands[2:] == [
        "trialfleet create --config examples/ray/config.yml --foreground",
        "ray job list --address http://127.0.0.1:8265",
        "kill -KILL %1 %2",
    ]
    env = user_env(
        tmp_path,
        **ENV,  # no usage statistics; a lost node noticed in seconds
        RAY_TMPDIR=temp_dir,  # Ray's sessions apart from another Ray of the machine, short for its sockets
    )
    try:
        # Ray's startup deadlines are fixed: on a loaded machine the nodes start ahead of other work, as in the
        # cluster fixture (ray_cluster.py)
        printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log", niceness=STARTING_NICENESS)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert "DONE" in printed[2] and "trials: " in printed[2], printed[2]
    assert printed[3].count("nni_exp_") >= 6, printed[3]
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _in(Path(f"/proc/{pid}"), str(tmp_path))]
    assert not left, f"processes of the cluster outlived the page's stop: {left}"


def _in(process: Path, root: str) -> bool:
    try:
        return root.encode() in (process / "environ").read_bytes()
    except OSError:
        return False
