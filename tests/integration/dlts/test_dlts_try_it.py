"""docs/dlts.md's "Trying it against the emulator", read from the page and run as written from the checkout root:
the emulator started in the background on 8090, the example config for it run, the emulator stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_as_written, try_it_steps, user_env

pytestmark = pytest.mark.netns  # the page's fixed ports, in a network of the test's own


def test_the_dlts_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "dlts.md", "## Trying it against the emulator")
    assert [step.command for step in steps][1:] == [
        "trialfleet create --config examples/dlts/config_emulator.yml --foreground",
        "kill %1",
    ]
    env = user_env(tmp_path)
    printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log")
    assert "DONE" in printed[1] and "trials: succeeded 2" in printed[1], printed[1]
    assert len(list((tmp_path / "dlts-nfs" / "work" / "trialfleet").glob("*/trials/*"))) == 2
