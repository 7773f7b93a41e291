"""docs/remote.md's "Try it", read from the page and run as written from the checkout root, on a machine whose sshd
lets its users in with their keys: an sshd of the test's own on 127.0.0.1:22 of the test's network, with the
user's home (the test's) where root's is, as on the page's machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_with_local_sshd, try_it_steps

pytestmark = pytest.mark.ssh


def test_the_remote_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "remote.md", "## Try it")
    assert steps[-1].command == "trialfleet create --config examples/remote/config_localhost.yml --foreground"
    printed, home = run_with_local_sshd(steps, tmp_path)
    assert "DONE" in printed[-1] and "trials: succeeded 4" in printed[-1], printed[-1]
    assert len(list((home / "trialfleet").glob("*/trials/*"))) == 4
