"""The trials page's TensorBoard button on a real local experiment whose trials write TensorBoard event files:
two selected trials get a TensorBoard serving exactly them, and "Stop all" ends it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from webui_experiments import manager_process, new_experiment, wait_for

from tests.integration.test_tensorboard import TRIAL
from trialfleet.storage import ExperimentStore
from trialfleet.tensorboard import installed
from trialfleet.testing.webui_scale import wait_js

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_tensorboard_button_serves_the_selected_trials(tmp_path: Path, page: Any) -> None:
    if not installed():
        pytest.fail("TensorBoard is a test dependency: pip install -e '.[test]' (the tensorboard extra)")
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=3, max_trial_number=3)
    (tmp_path / "code" / "trial.py").write_text(TRIAL.replace('params["x"]', 'params["lr"]'))
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    with manager_process(experiment_dir, "create") as manager:
        wait_for(
            lambda: store.trial_counts().get("SUCCEEDED") == 3, timeout=120, what="three trials to succeed"
        )
        page.goto(f"{manager.url}/#/trials")
        wait_js(page, "() => document.querySelectorAll('#trials-table tbody tr[data-trial]').length === 3")
        rows = page.locator("#trials-table tbody tr[data-trial]")
        chosen = [rows.nth(i).get_attribute("data-trial") for i in (0, 2)]
        for i in (0, 2):
            rows.nth(i).locator("input[type=checkbox]").check()
        page.locator("#tensorboard-btn").click()
        link = page.locator("#tensorboard-open")
        link.wait_for(timeout=60_000)
        url = str(link.get_attribute("href"))
        seqs = {t.id: t.sequence_id for t in store.trials()}
        expected = sorted(f"{seqs[t]}-{t}" for t in chosen if t)

        def runs() -> list[str] | None:
            try:
                return sorted(r.removesuffix("/.") for r in httpx.get(f"{url}data/runs", timeout=10).json())
            except httpx.HTTPError:
                return None

        assert wait_for(runs, timeout=120, what="TensorBoard to answer") == expected
        page.locator("#tensorboard-stop-all").click()
        page.locator("#tensorboard-tasks tr[data-status=STOPPED]").wait_for(timeout=60_000)
        wait_for(lambda: runs() is None, timeout=60, what="TensorBoard to stop answering")
    store.close()
