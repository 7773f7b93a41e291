"""docs/kubernetes.md's "Try it against the emulator", read from the page and run as written from the checkout
root: the export created, the emulator started in the background, the three examples run, the emulator stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import ROOT, run_as_written, try_it_steps, user_env

pytestmark = pytest.mark.netns  # the page's fixed ports, in a network of the test's own


def test_the_kubernetes_page_try_it_runs_as_written(tmp_path: Path) -> None:
    steps = try_it_steps(ROOT / "docs" / "kubernetes.md", "## Try it against the emulator")
    creates = [step.command for step in steps if step.command.startswith("trialfleet create")]
    assert [command.split()[3] for command in creates] == [
        f"examples/kubernetes/{name}.yml" for name in ("frameworkcontroller", "kubeflow", "adl")
    ]
    env = user_env(tmp_path)
    env.pop("KUBECONFIG", None)
    printed = run_as_written(steps, ROOT, env, tmp_path / "terminal.log")
    for command, output in zip(creates, printed[-4:-1], strict=True):
        assert "DONE" in output and "trials: succeeded 2" in output, f"{command}\n{output}"
    export = tmp_path / "k8s" / "nfs" / "10.20.30.40" / "mnt" / "nfs" / "nni"
    assert len(list(export.glob("nni/*/trials/*"))) == 6
