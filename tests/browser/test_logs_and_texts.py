"""Issue 46, items 5 and 6 in the page: the experiment's logs in a panel that follows the file, and the numbers
and texts that confused (which duration is which, no bare ``null``, hints for what the page does not accept)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from webui_experiments import fill, manager_process, new_experiment

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore

pytestmark = pytest.mark.browser

STATUSES = [TrialStatus.SUCCEEDED, TrialStatus.FAILED, TrialStatus.SUCCEEDED, TrialStatus.RUNNING]


@dataclass(frozen=True)
class Viewed:
    url: str
    experiment_dir: Path


@pytest.fixture(scope="module")
def viewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewed]:
    tmp_path = tmp_path_factory.mktemp("texts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
        _, experiment_dir = new_experiment(tmp_path)
        store = ExperimentStore.for_experiment_dir(experiment_dir)
        fill(store, len(STATUSES), 3, STATUSES)
        store.close()
        with manager_process(experiment_dir, "view") as manager:
            yield Viewed(manager.url, experiment_dir)


def test_the_manager_log_opens_in_a_panel_that_follows_the_file(viewed: Viewed, page: Any) -> None:
    log = viewed.experiment_dir / "log" / "manager.log"
    with log.open("a") as f:
        f.write("a line written before the panel opened\n")
    page.goto(f"{viewed.url}/#/overview")
    page.locator("#exp-title .badge").wait_for()
    page.locator("#manager-log").click()
    panel = page.locator("#log-panel #experiment-log")
    panel.wait_for()
    assert len(page.context.pages) == 1  # no raw text in a new tab
    first_line = "a line written before the panel opened"
    page.wait_for_function("t => document.querySelector('#experiment-log').textContent.includes(t)", arg=first_line)
    with log.open("a") as f:
        f.write("a line written after the panel opened ✓\n")
    page.wait_for_function(
        "() => document.querySelector('#experiment-log').textContent.includes('after the panel opened \u2713')"
    )
    assert panel.inner_text().count(first_line) == 1  # only the new bytes were appended
    page.keyboard.press("Escape")
    page.locator("#log-panel").wait_for(state="detached")
    page.locator("#dispatcher-log").click()  # NNI's name for the same log
    page.wait_for_function("t => document.querySelector('#experiment-log')?.textContent.includes(t)", arg=first_line)
    page.keyboard.press("Escape")
    page.locator("#overview-manager-log").click()  # the experiment card's link opens the same panel
    page.wait_for_function("t => document.querySelector('#experiment-log')?.textContent.includes(t)", arg=first_line)
    assert len(page.context.pages) == 1


def test_each_duration_says_which_it_is(viewed: Viewed, page: Any) -> None:
    """The overview's run time (NNI's execDuration) and All experiments' start-to-end time differed unlabelled."""
    page.goto(f"{viewed.url}/#/overview")
    run_time = page.locator("#run-time")
    run_time.wait_for()
    assert "execDuration" in (run_time.get_attribute("title") or "")
    assert page.locator(".card-head h2", has_text="Run time").count() == 1
    page.goto(f"{viewed.url}/#/experiments")
    header = page.locator("table thead th", has_text="Start to end")
    header.wait_for()
    assert "stopped periods included" in (header.get_attribute("title") or "")


def test_a_trial_without_a_final_result_says_why_instead_of_null(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/trials/t00001")  # FAILED: it reported no FINAL metric
    page.locator("#trial-detail .tab[data-tab=parameters]").click()  # a failed trial opens on its stderr
    why = page.locator("#trial-detail #no-final-result")
    why.wait_for()
    assert "only a SUCCEEDED trial has a final result" in why.inner_text()
    assert "null" not in page.locator("#trial-detail .drawer-body").inner_text()
    page.goto(f"{viewed.url}/#/trials/t00003")  # RUNNING
    page.locator("#trial-detail[data-trial=t00003] #no-final-result", has_text="not finished").wait_for()


def test_the_metric_chart_shows_parameters_opens_a_trial_and_scales_its_density(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/overview")
    page.wait_for_function(
        "() => document.getElementById('overview-metric-plot')?.data?.[0]?.customdata?.[0]?.[1]?.includes('lr=')"
    )
    point = page.locator("#overview-metric-plot .point").first
    point.hover()
    tip = page.locator("#overview-metric-plot .chart-tip")
    assert "lr=" in tip.inner_text()  # the parameters, in the tooltip
    assert tip.inner_text().startswith("Trial 0 (t00000)")
    point.click()
    page.locator("#trial-detail[data-trial=t00000]").wait_for()
    density = page.evaluate(
        """async () => {
          const { finalMetricPlot } = await import('./webui/js/plots.js');
          const el = document.createElement('div');
          document.body.append(el);
          const trials = Array.from({ length: 1600 }, (_, i) =>
            ({ id: `x${i}`, seq: i, status: 'SUCCEEDED', final: (i % 97) / 97 }));
          finalMetricPlot(el, trials, 'maximize');
          const counts = [...el.querySelectorAll('.cell')].map((c) => Number(c.dataset.count));
          return {
            type: el.data[0].type, title: el.querySelector('.colorbar .axis-title').textContent,
            cells: counts.length, counted: counts.reduce((a, b) => a + b, 0),
          };
        }"""
    )
    # every trial counted in a cell; 1600 trials over 97 metric values in 60 x 40 cells
    assert density["type"] == "histogram2d" and density["title"] == "trials" and density["counted"] == 1600
    assert 60 <= density["cells"] < 60 * 40


def test_the_intermediate_filter_applies_as_typed(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/charts")
    page.locator("#intermediate-min").wait_for()
    with page.expect_request(lambda r: "/intermediate?" in r.url and "min=0.6" in r.url, timeout=10_000):
        page.locator("#intermediate-min").fill("0.6")  # no Enter, no blur


def test_a_search_that_cannot_match_as_written_says_why(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/trials")
    page.locator("#trials-table tbody tr[data-trial]").first.wait_for()
    page.locator("#trial-search").fill("lr:abc")
    hint = page.locator("#search-hints", has_text="lr takes numbers")
    hint.wait_for()
    page.locator("#trial-search").fill("lr:0.001..0.01")
    page.locator("#search-hints").wait_for(state="hidden")


def test_a_manager_that_does_not_answer_is_said_in_words(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/overview")
    page.locator("#exp-title .badge").wait_for()
    page.route("**/api/v1/trialfleet/trials/**", lambda route: route.abort())
    message = page.evaluate(
        "async () => { const { api } = await import('./webui/js/api.js');"
        " try { await api.trial('t00000'); return 'answered'; } catch (e) { return e.message; } }"
    )
    assert "the manager does not answer" in message and "Failed to fetch" not in message, message
