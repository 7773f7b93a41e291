"""The web UI on a real running experiment: a manager process running real local trials (`import nni`)."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from webui_experiments import hold_trials, manager_process, new_experiment, screenshot, wait_for

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def reader(experiment_dir: Path) -> ExperimentStore:
    return ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)


def running_trial(store: ExperimentStore) -> str | None:
    running = store.trials(status=TrialStatus.RUNNING)
    return running[0].id if running else None


def trial_pid(store: ExperimentStore, trial_id: str) -> int:
    """The trial command's pid, from the keeper's record in the trial directory."""
    trial_dir = Path(store.trial(trial_id).handle["trial_dir"])  # type: ignore[index]
    record = wait_for(
        lambda: (trial_dir / "keeper.json").is_file() and (trial_dir / "keeper.json").read_text()
    )
    return int(json.loads(record)["pid"])


def process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_trial_appears_changes_state_and_shows_its_log_and_curve_live(tmp_path: Path, page: Any) -> None:
    hold_trials(tmp_path, True)
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=1, max_trial_number=2)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        page.goto(f"{manager.url}/#/trials")
        page.evaluate("window.__notReloaded = true")
        first = wait_for(lambda: running_trial(store), what="the first trial to run")
        row = page.locator(f"#trials-table tr[data-trial='{first}']")
        row.and_(page.locator("[data-status=RUNNING]")).wait_for()

        row.click()
        page.locator("#trial-detail .tab[data-tab=logs]").click()
        page.wait_for_function(
            "id => document.querySelector('#trial-log')?.textContent.includes('hello from ' + id)", arg=first
        )
        page.locator("#trial-detail button[data-log=stderr]").click()
        page.wait_for_function(
            "() => document.querySelector('#trial-log')?.textContent.includes('to stderr')"
        )
        page.locator("#trial-detail .tab[data-tab=intermediate]").click()
        # the curve grows while the trial runs: at least 10 points means reports after the first 8 arrived live
        page.wait_for_function(
            "() => (document.querySelector('#detail-plot')?.data?.[0]?.x.length || 0) >= 10", timeout=30_000
        )
        assert page.locator("#detail-plot .scatterlayer .trace .point").count() >= 10
        screenshot(page, "trial-detail-running")
        page.locator("#detail-close").click()

        hold_trials(tmp_path, False)
        started = time.monotonic()
        row.and_(page.locator("[data-status=SUCCEEDED]")).wait_for(timeout=30_000)
        print(f"SUCCEEDED shown {time.monotonic() - started:.1f} s after the hold was released")
        second = wait_for(lambda: len(store.trials()) == 2 and store.trials()[-1].id, what="the second trial")
        page.locator(f"#trials-table tr[data-trial='{second}']").wait_for()
        assert page.evaluate("window.__notReloaded") is True
        assert (
            row.locator("td.num.strong").inner_text() != "\u2013"
        )  # its final metric arrived with the change


def test_killing_a_trial_from_the_page_ends_its_process(tmp_path: Path, page: Any) -> None:
    hold_trials(tmp_path, True)
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=1, max_trial_number=1)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        trial_id = wait_for(lambda: running_trial(store), what="a running trial")
        pid = trial_pid(store, trial_id)
        assert not process_gone(pid)
        page.goto(f"{manager.url}/#/trials")
        page.locator(f"button[data-action=kill][data-trial='{trial_id}']").click()
        page.locator("#confirm-kill").click()
        page.locator(f"#trials-table tr[data-trial='{trial_id}'][data-status=USER_CANCELED]").wait_for()
        wait_for(lambda: process_gone(pid), timeout=15, what=f"trial process {pid} to end")
        assert store.trial(trial_id).status is TrialStatus.USER_CANCELED
        hold_trials(tmp_path, False)


def test_a_page_answer_older_than_a_kill_does_not_take_the_row_back(tmp_path: Path, page: Any) -> None:
    """The trials page asks for its page, the trial is killed, the change feed's delta draws it killed, and
    only then does the page's answer (taken before the kill, the trial RUNNING in it) arrive."""
    hold_trials(tmp_path, True)
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=1, max_trial_number=1)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        trial_id = wait_for(lambda: running_trial(store), what="a running trial")
        page.goto(f"{manager.url}/#/trials")
        row = page.locator(f"#trials-table tr[data-trial='{trial_id}']")
        row.and_(page.locator("[data-status=RUNNING]")).wait_for()
        held: list[tuple[Any, Any]] = []  # (route, the answer it got when it was asked)

        def hold(route: Any) -> None:
            # only the queries of the new order: a page query of the old one, sent before the click (the change
            # feed's reload of the page), is answered; its answer is not drawn, the click's query follows it
            if "order=asc" not in route.request.url:
                route.continue_()
                return
            held.append((route, route.fetch() if not held else None))

        page.route("**/api/v1/trialfleet/trials?*", hold)
        page.locator("#trials-table th.sorted").click()  # Trial No., now ascending: asks for the page again
        deadline = time.monotonic() + 30
        while not held:  # the route's handler runs while Playwright is called
            assert time.monotonic() < deadline, "the page never asked for its trials again"
            page.wait_for_timeout(20)
        assert "RUNNING" in held[0][1].text()
        request = urllib.request.Request(f"{manager.url}/api/v1/nni/trial-jobs/{trial_id}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()
        row.and_(page.locator("[data-status=USER_CANCELED]")).wait_for()  # drawn from the change feed
        route, answer = held[0]
        route.fulfill(response=answer)
        page.locator("#trials-table th.sorted", has_text="\u25b2").wait_for()  # the old answer is drawn
        assert row.get_attribute("data-status") == "USER_CANCELED"
        for route, _ in held[1:]:  # the page's queries after the old answer (unroute lets later ones through)
            route.continue_()
        page.unroute("**/api/v1/trialfleet/trials?*")
        hold_trials(tmp_path, False)


def edit(page: Any, button: str, value: str) -> None:
    page.locator(button).click()
    page.locator(".dialog input").fill(value)
    page.locator("#save-edit").click()
    page.locator(".dialog").wait_for(state="detached")


def test_editing_the_experiment_and_submitting_a_customized_trial_take_effect(
    tmp_path: Path, page: Any
) -> None:
    hold_trials(tmp_path, True)
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=1, max_trial_number=3)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        wait_for(lambda: running_trial(store), what="a running trial")
        page.goto(f"{manager.url}/#/overview")
        page.locator("#status-counts .chip[data-status=RUNNING] .count").wait_for()

        edit(page, "#edit-concurrency", "2")
        wait_for(
            lambda: store.experiment().config["trialConcurrency"] == 2, what="concurrency 2 in the manager"
        )
        wait_for(lambda: store.trial_counts().get(TrialStatus.RUNNING) == 2, what="a second running trial")
        page.wait_for_function("() => document.querySelector('#concurrency').textContent === '2'")
        page.wait_for_function("() => document.querySelector('#running').textContent === '2'")

        edit(page, "#edit-max-trial-number", "5")
        wait_for(lambda: store.experiment().config["maxTrialNumber"] == 5, what="maxTrialNumber 5")
        edit(page, "#edit-max-duration", "2h")
        wait_for(
            lambda: store.experiment().config["maxExperimentDuration"] in (7200, "7200s", "2h"), what="2h"
        )
        page.wait_for_function("() => document.querySelector('#max-duration').textContent === '2h'")
        page.locator("#edit-max-duration").click()  # the dialog shows it as typed, not as 7200s (issue 46, item 5)
        assert page.locator(".dialog input").input_value() == "2h"
        page.keyboard.press("Escape")
        screenshot(page, "overview-running")

        page.goto(f"{manager.url}/#/trials")
        page.locator("#custom-trial-btn").click()
        page.locator("#customize-form input[name=lr]").fill("0.0123")
        page.locator("#customize-form select[name=optimizer]").select_option('"adam"')
        page.locator("#submit-custom").click()
        custom = wait_for(
            lambda: [t for t in store.trials() if t.parameter_source == "customized"],
            what="the customized trial",
        )
        assert custom[0].hyper_parameters["lr"] == 0.0123
        assert custom[0].hyper_parameters["optimizer"] == "adam"
        page.locator(f"#trials-table tr[data-trial='{custom[0].id}']").wait_for()
        hold_trials(tmp_path, False)


def test_a_finished_experiment_renders_every_page_with_its_trials(tmp_path: Path, page: Any) -> None:
    """24 real trials chosen by TPE, four at a time; the screenshots of this run illustrate the docs."""
    tuner = {"name": "TPE", "classArgs": {"optimize_mode": "maximize", "seed": 3}}
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=4, max_trial_number=24, tuner=tuner)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        page.goto(f"{manager.url}/#/overview")
        page.locator("#exp-title .badge[data-status=DONE]").wait_for(timeout=90_000)
        assert store.trial_counts() == {TrialStatus.SUCCEEDED: 24}
        page.wait_for_function("() => document.querySelectorAll('#best-trials tbody tr').length === 10")
        assert page.locator("#status-counts .chip[data-status=SUCCEEDED] .count").inner_text() == "24"
        page.wait_for_function("() => document.querySelectorAll('#overview-metric-plot .point').length === 24")
        screenshot(page, "overview")

        page.goto(f"{manager.url}/#/trials")
        page.locator("#trials-table tbody tr[data-status=SUCCEEDED]").first.wait_for()
        assert page.locator("#trials-table tbody tr").count() == 20
        screenshot(page, "trials")

        page.goto(f"{manager.url}/#/charts")
        page.wait_for_function("() => document.querySelectorAll('#chart-metric .point').length === 24")
        page.wait_for_function(
            "() => document.querySelectorAll('#chart-intermediate .trace').length === 24"
        )
        assert page.locator("#chart-duration .bar").count() == 24
        assert page.locator("#chart-parallel .y-axis").count() == 4
        screenshot(page, "charts")


def test_when_every_trial_fails_the_overview_and_the_trial_show_why(tmp_path: Path, page: Any) -> None:
    """A trial run by a python without the module it imports (an unactivated virtual environment)."""
    command = f"{sys.executable} -c 'import no_such_module_here'"
    _, experiment_dir = new_experiment(tmp_path, trial_command=command, max_trial_number=2)
    with manager_process(experiment_dir, "create") as manager:
        page.goto(f"{manager.url}/#/overview")
        callout = page.locator("#first-failure")
        callout.wait_for(timeout=60_000)
        assert "none succeeded yet" in callout.inner_text()
        assert "ModuleNotFoundError: No module named 'no_such_module_here'" in callout.inner_text()
        page.goto(f"{manager.url}/#/trials")
        page.locator("#trials-table tbody tr[data-status=FAILED]").first.click()
        log = page.locator("#trial-log")
        log.wait_for()
        wait_for(
            lambda: "No module named 'no_such_module_here'" in log.inner_text(), what="stderr in the drawer"
        )
        assert page.locator("#trial-detail .tab[data-tab=logs]").get_attribute("class") == "tab active"


def test_the_customized_trial_dialog_checks_its_fields_and_offers_to_raise_max_trials(
    tmp_path: Path, page: Any
) -> None:
    """Issue 46, item 3: an empty or out-of-range field is named in the dialog before anything is sent, and once
    the experiment is DONE at its max trial number the dialog offers to raise it instead of adding a trial."""
    _, experiment_dir = new_experiment(tmp_path, trial_concurrency=2, max_trial_number=2)
    store = reader(experiment_dir)
    with manager_process(experiment_dir, "create") as manager:
        wait_for(lambda: store.experiment().status.value == "DONE", timeout=90, what="the experiment DONE")
        posted: list[str] = []
        page.on("request", lambda r: posted.append(r.url) if r.method == "POST" and "trial-jobs" in r.url else None)
        page.goto(f"{manager.url}/#/trials")
        page.locator("#trials-table tbody tr[data-status=SUCCEEDED]").first.wait_for()
        page.locator("#custom-trial-btn").click()
        problem = page.locator("#customize-problem")
        problem.and_(page.locator(":visible")).wait_for()
        assert problem.inner_text().startswith("lr:"), problem.inner_text()  # left empty
        assert "invalid" in (page.locator("#customize-form input[name=lr]").get_attribute("class") or "")
        assert page.locator("#submit-custom").is_disabled()

        page.locator("#customize-form input[name=lr]").fill("7")  # outside loguniform [0.0001, 0.1]
        page.wait_for_function("() => document.querySelector('#customize-problem').textContent.includes('7 is not')")
        page.locator("#customize-form input[name=lr]").fill("0.01")
        page.wait_for_function("() => document.querySelector('#customize-problem').textContent.includes('maxTrialNumber')")
        assert page.locator("#submit-custom").is_disabled()
        assert page.locator("#raise-and-submit").inner_text() == "Raise max trials to 3 and submit"
        assert posted == [] and len(store.trials()) == 2 and store.experiment().status.value == "DONE"

        page.locator("#raise-and-submit").click()
        custom = wait_for(
            lambda: [t for t in store.trials() if t.parameter_source == "customized"], what="the customized trial"
        )
        assert custom[0].hyper_parameters["lr"] == 0.01
        page.locator(".dialog").wait_for(state="detached")
        assert store.experiment().config["maxTrialNumber"] == 3
        assert len(store.trials()) == 3  # the tuner got no slot from the raise
