"""docs/openpai.md's "Try it against the emulator", read from the page and run as written from the checkout root:
the emulator started in the background with the page's token, the example config for it run, the jobs listed with
that token, the emulator stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_as_written, try_it_steps, user_env

pytestmark = pytest.mark.netns  # the page's fixed ports, in a network of the test's own


def test_the_openpai_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "openpai.md", "## Try it against the emulator")
    commands = [step.command for step in steps]
    assert commands[1] == "trialfleet create --config examples/openpai/config_emulator.yml --foreground"
    assert commands[2].startswith("curl ") and commands[3] == "kill %1"
    env = user_env(tmp_path)
    printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log")
    assert "DONE" in printed[1] and "trials: succeeded 2" in printed[1], printed[1]
    jobs = json.loads(printed[2])
    assert jobs and all(job["username"] == "alice" for job in jobs), jobs
    assert len(list((tmp_path / "pai-nfs").glob("*/trials/*"))) == 2
