"""10,000 trials and 110,000 metrics: the pages load and page through them (timings printed, not asserted)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webui_experiments import fill, final_of, manager_process, new_experiment, screenshot

from trialfleet.storage import ExperimentStore
from trialfleet.testing.webui_scale import wait_js

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TRIALS = 10_000
STEPS = 10


@pytest.fixture
def big(tmp_path: Path) -> Iterator[str]:
    _, experiment_dir = new_experiment(tmp_path, max_trial_number=TRIALS)
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    started = time.monotonic()
    fill(store, TRIALS, STEPS)
    print(
        f"\nfilled {TRIALS} trials and {store.metric_count()} metrics in {time.monotonic() - started:.1f} s"
    )
    store.close()
    with manager_process(experiment_dir, "view") as manager:
        yield manager.url


def timed(label: str, action: Any) -> None:
    started = time.monotonic()
    action()
    print(f"{label}: {time.monotonic() - started:.2f} s")


def first_row(page: Any) -> str:
    return str(page.locator("#trials-table tbody tr").first.get_attribute("data-trial"))


def wait_range(page: Any, text: str) -> None:
    page.wait_for_function("t => document.querySelector('#page-range')?.textContent === t", arg=text)


def test_trials_page_loads_and_pages_through_ten_thousand_trials(big: str, page: Any) -> None:
    last = f"t{TRIALS - 1:05d}"
    timed(
        "trials page, first 20 rows",
        lambda: (page.goto(f"{big}/#/trials"), wait_range(page, "1\u201320 of 10,000")),
    )
    assert first_row(page) == last
    timed("next page", lambda: (page.locator("#next-page").click(), wait_range(page, "21\u201340 of 10,000")))
    assert first_row(page) == f"t{TRIALS - 21:05d}"
    timed(
        "last page",
        lambda: (
            page.locator("#page-input").fill("500"),
            page.locator("#page-input").press("Enter"),
            wait_range(page, "9981\u201310000 of 10,000"),
        ),
    )
    assert first_row(page) == "t00019"

    def sort_by_metric() -> None:
        header = page.locator("#trials-table th", has_text="Default metric")
        header.click()
        header.click()
        best = max(range(TRIALS), key=lambda i: (final_of(i), -i))
        page.wait_for_function(
            "id => document.querySelector('#trials-table tbody tr')?.dataset.trial === id", arg=f"t{best:05d}"
        )

    timed("sort by default metric", sort_by_metric)
    timed(
        "search one trial",
        lambda: (page.locator("#trial-search").fill("t04321"), wait_range(page, "1\u20131 of 1")),
    )
    assert first_row(page) == "t04321"
    screenshot(page, "trials-10k")

    timed(
        "overview",
        lambda: (page.goto(f"{big}/#/overview"), page.locator("#best-trials tbody tr").first.wait_for()),
    )
    assert page.locator("#trial-total").inner_text().startswith("10000")

    def charts() -> None:
        page.goto(f"{big}/#/charts")
        wait_js(page, "() => document.querySelector('#chart-metric')?.data?.[0]?.x.length === 10000")
        assert page.evaluate("() => document.querySelector('#chart-metric').data[0].type") == "histogram2d"
        wait_js(
            page, "() => document.querySelectorAll('#chart-intermediate .trace').length === 50"
        )
        # a histogram of every trial's duration, not 10,000 bars
        wait_js(
            page,
            "() => (document.querySelector('#chart-duration')?.data || [])"
            ".reduce((n, t) => n + (t.type === 'histogram' ? t.x.length : 0), 0) === 10000",
        )

    timed("charts page with 10,000 trials", charts)
    wait_js(page, "() => document.querySelectorAll('#chart-parallel .y-axis').length === 4")
    assert len(page.evaluate("() => document.querySelector('#chart-parallel').data[0].customdata")) == 100
    cursor = page.request.get(f"{big}/api/v1/trialfleet/changes").json()["cursor"]
    quiet = page.request.get(f"{big}/api/v1/trialfleet/changes?cursor={cursor}")
    assert quiet.json()["trials"] == []
    print(f"a poll with nothing new answers {len(quiet.body())} bytes")
