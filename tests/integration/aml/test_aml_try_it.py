"""docs/aml.md's "Trying it against the emulator", read from the page and run as written from the checkout root: the
emulator started in the background, its variables sourced, the example config for it run, the emulator stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_as_written, try_it_steps, user_env

pytestmark = pytest.mark.netns  # the page's fixed ports, in a network of the test's own

#: what the test's own process has that the user's shell would not: the page's commands set their own
CLIENT_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "HTTPS_PROXY", "NO_PROXY", "AZUREML_CURRENT_CLOUD")


def test_the_aml_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "aml.md", "## Trying it against the emulator")
    assert [step.command for step in steps][2:] == [
        "trialfleet create --config examples/aml/config_emulator.yml --foreground",
        "kill %1",
    ]
    user = user_env(tmp_path)
    env = {k: v for k, v in user.items() if k not in CLIENT_VARIABLES and not k.startswith("AZURE_")}
    printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log")
    assert "DONE" in printed[2] and "trials: succeeded 2" in printed[2], printed[2]
    assert "experimental class" not in printed[2], printed[2]
