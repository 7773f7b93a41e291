"""docs/hybrid.md's "Try it", read from the page and run as written from the checkout root: local and this machine's
own sshd (an sshd of the test's own on 127.0.0.1, as for docs/remote.md's) in one experiment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_with_local_sshd, try_it_steps

pytestmark = pytest.mark.ssh


def test_the_hybrid_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "hybrid.md", "## Try it")
    assert steps[-1].command == "trialfleet create --config examples/hybrid/config_localhost.yml --foreground"
    printed, home = run_with_local_sshd(steps, tmp_path)
    assert "DONE" in printed[-1] and "trials: succeeded 4" in printed[-1], printed[-1]
    on_remote = list((home / "trialfleet").glob("*/trials/*"))
    assert 0 < len(on_remote) < 4, on_remote  # the others ran on local
