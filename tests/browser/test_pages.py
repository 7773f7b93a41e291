"""Every page of the web UI on an experiment with known content, served by a real manager in view mode."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from webui_experiments import (
    fill,
    final_of,
    manager_process,
    new_experiment,
    params_of,
    screenshot,
)

from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.training_services.gpu import GpuInfo, allocate_gpus
from trialfleet.training_services.gpu_leases import GpuLeases, Taken

pytestmark = pytest.mark.browser

N = 60
STEPS = 12


def status_of(i: int) -> TrialStatus:
    if i == N - 1:
        return TrialStatus.RUNNING
    if i == N - 2:
        return TrialStatus.WAITING
    if i % 11 == 3:
        return TrialStatus.FAILED
    if i % 13 == 5:
        return TrialStatus.USER_CANCELED
    if i % 17 == 7:
        return TrialStatus.EARLY_STOPPED
    return TrialStatus.SUCCEEDED


STATUSES = [status_of(i) for i in range(N)]
SUCCEEDED = [i for i in range(N) if STATUSES[i] is TrialStatus.SUCCEEDED]
ERROR = "tuner failed in generate_parameters: out of memory"


@dataclass(frozen=True)
class Viewed:
    url: str
    experiment_id: str
    home: Path


@pytest.fixture(scope="module")
def viewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewed]:
    tmp_path = tmp_path_factory.mktemp("viewed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
        experiment_id, experiment_dir = new_experiment(tmp_path)
        store = ExperimentStore.for_experiment_dir(experiment_dir)
        fill(store, N, STEPS, STATUSES)
        store.update_experiment(status="ERROR", error=ERROR)
        store.close()
        with manager_process(experiment_dir, "view") as manager:
            yield Viewed(manager.url, experiment_id, tmp_path / "home")


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def count_in(page: Any, selector: str) -> int:
    return int(page.locator(selector).count())


def test_the_overview_draws_its_chart_before_every_trial_s_summary_arrives(viewed: Viewed, page: Any) -> None:
    held: list[Any] = []
    page.route(
        "**/api/v1/trialfleet/trials/all", lambda route: held.append(route)
    )  # not answered until the chart is drawn
    page.goto(f"{viewed.url}/#/overview")
    page.wait_for_function(
        "n => document.querySelectorAll('#overview-metric-plot .point').length === n",
        arg=len(SUCCEEDED),
    )
    for route in held:
        route.continue_()
    assert held  # asked for after the chart was drawn
    page.unroute("**/api/v1/trialfleet/trials/all")


def test_overview_shows_counts_best_trials_search_space_and_the_error(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/overview")
    page.locator("#best-trials tbody tr").first.wait_for()
    for status, number in Counter(STATUSES).items():
        assert texts(page, f"#status-counts .chip[data-status={status.value}] .count") == [str(number)]
    assert page.locator("#trial-total").inner_text().startswith(str(N))
    best = max(SUCCEEDED, key=final_of)
    assert texts(page, "#best-trials tbody tr td:first-child")[0] == str(best)
    assert count_in(page, "#best-trials tbody tr") == 10

    page.locator("#best-mode").select_option("minimize")
    worst = min(SUCCEEDED, key=final_of)
    page.wait_for_function(
        "n => document.querySelector('#best-trials tbody tr td')?.textContent === String(n)", arg=worst
    )
    assert count_in(page, "#search-space-table tbody tr") == 3
    page.wait_for_function(
        "n => document.querySelectorAll('#overview-metric-plot .point').length === n",
        arg=len(SUCCEEDED),
    )
    assert ERROR in page.locator("#exp-error").inner_text()
    log_link = page.locator("#exp-error a").get_attribute("href")
    assert log_link == "logs/manager.log"
    assert page.request.get(f"{viewed.url}/{log_link}").ok
    assert page.locator("#edit-concurrency").is_disabled()  # a viewed experiment cannot be changed
    screenshot(page, "overview-viewed")


def range_text(page: Any) -> str:
    return str(page.locator("#page-range").inner_text())


def wait_range(page: Any, text: str) -> None:
    page.wait_for_function("t => document.querySelector('#page-range')?.textContent === t", arg=text)


def test_trials_table_searches_filters_sorts_pages_and_chooses_columns(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/trials")
    wait_range(page, f"1\u201320 of {N}")
    assert texts(page, "#trials-table tbody tr td.num")[0] == str(N - 1)  # newest first
    page.locator("#next-page").click()
    wait_range(page, f"21\u201340 of {N}")
    assert page.locator("#trials-table tbody tr").first.get_attribute("data-trial") == f"t{N - 21:05d}"

    page.locator("#trial-search").fill("t00042")
    wait_range(page, "1\u20131 of 1")
    page.locator("#trial-search").fill("rmsprop")
    rmsprop = sum(1 for i in range(N) if params_of(i)["optimizer"] == "rmsprop")
    wait_range(page, f"1\u2013{min(20, rmsprop)} of {rmsprop}")
    page.locator("#trial-search").fill("")

    failed = STATUSES.count(TrialStatus.FAILED)
    page.locator("#status-filter .chip[data-status=FAILED]").click()
    wait_range(page, f"1\u2013{failed} of {failed}")
    assert set(
        page.locator("#trials-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    ) == {"FAILED"}
    page.locator("#status-filter .chip[data-status=FAILED]").click()
    wait_range(page, f"1\u201320 of {N}")

    page.locator("#trials-table th", has_text="Default metric").click()  # ascending, trials without one last
    page.locator("#trials-table th", has_text="Default metric").click()  # descending
    best = max(SUCCEEDED, key=final_of)
    page.wait_for_function(
        "id => document.querySelector('#trials-table tbody tr')?.dataset.trial === id", arg=f"t{best:05d}"
    )
    assert "loss" in texts(page, "#trials-table thead th")  # a dict metric key is a column

    page.locator("#columns-btn").click()
    page.locator(".dialog input[data-column='param.lr']").uncheck()
    assert "lr" not in texts(page, "#trials-table thead th")
    page.locator(".dialog input[data-column='param.lr']").check()
    assert "lr" in texts(page, "#trials-table thead th")
    page.locator(".dialog .icon-btn").click()
    screenshot(page, "trials-viewed")


def test_trial_detail_and_compare_show_parameters_and_curves(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/trials/t00010")
    page.locator("#trial-detail pre.json").first.wait_for()
    assert '"optimizer": "adam"' in page.locator("#trial-detail pre.json").first.inner_text()
    page.locator("#trial-detail .tab[data-tab=intermediate]").click()
    page.wait_for_function(
        "n => document.querySelectorAll('#detail-plot .scatterlayer .trace .point').length === n", arg=STEPS
    )
    assert count_in(page, "#detail-metrics tbody tr") == STEPS + 1  # and the final result
    page.locator("#detail-close").click()
    page.locator("#trial-detail").wait_for(state="detached")

    rows = page.locator("#trials-table tbody tr")
    rows.nth(2).locator("input[type=checkbox]").check()
    rows.nth(3).locator("input[type=checkbox]").check()
    page.locator("#compare-btn").click()
    assert count_in(page, "#compare-table thead th") == 3
    page.wait_for_function(
        "() => document.querySelectorAll('#compare-plot .scatterlayer .trace').length === 2"
    )


def parallel_labels(page: Any) -> list[str]:
    return page.evaluate(
        "() => document.querySelector('#chart-parallel').data[0].dimensions.map((d) => d.label)"
    )


def brush_and_reorder_the_parallel_axes(page: Any) -> None:
    """A drag along the metric axis keeps the trials in that range and says how many; a click on the axis
    clears it; a title dragged sideways moves its axis, and the metric axis stays there when redrawn."""
    hit = page.locator("#chart-parallel .y-axis[data-label=metric] .axis-hit").bounding_box()
    x = hit["x"] + hit["width"] / 2
    page.mouse.move(x, hit["y"] + 2)
    page.mouse.down()
    page.mouse.move(x, hit["y"] + hit["height"] * 0.6, steps=5)
    page.mouse.up()
    metric = page.evaluate("() => document.querySelector('#chart-parallel').data[0].dimensions.at(-1)")
    low, high = metric["constraintrange"]
    kept = sum(1 for v in metric["values"] if low <= v <= high)
    assert 0 < kept < len(metric["values"])
    note = page.locator("#chart-parallel .parcoords-note")
    assert note.inner_text().startswith(f"{kept} of {len(metric['values'])} trials in the brushed ranges")
    page.mouse.click(x, hit["y"] + hit["height"] * 0.3)
    assert note.inner_text() == ""
    assert "constraintrange" not in page.evaluate(
        "() => document.querySelector('#chart-parallel').data[0].dimensions.at(-1)"
    )

    assert parallel_labels(page) == ["lr (log)", "optimizer", "metric"]
    title = page.locator("#chart-parallel .y-axis[data-label=metric] .axis-title").bounding_box()
    first = page.locator("#chart-parallel .y-axis[data-label='lr (log)'] .axis-title").bounding_box()
    page.mouse.move(title["x"] + title["width"] / 2, title["y"] + title["height"] / 2)
    page.mouse.down()
    page.mouse.move(first["x"] - 30, title["y"] + title["height"] / 2, steps=8)
    page.mouse.up()
    assert parallel_labels(page) == ["metric", "lr (log)", "optimizer"]
    page.locator("input[data-axis=batch_size]").check()  # a redraw with another axis
    page.wait_for_function("() => document.querySelectorAll('#chart-parallel .y-axis').length === 4")
    assert parallel_labels(page) == ["metric", "lr (log)", "optimizer", "batch_size (log)"]
    page.locator("input[data-axis=batch_size]").uncheck()
    page.wait_for_function("() => document.querySelectorAll('#chart-parallel .y-axis').length === 3")


def test_charts_render_every_chart_with_data(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/charts")
    page.wait_for_function(
        "n => document.querySelectorAll('#chart-metric .point').length === n",
        arg=len(SUCCEEDED),
    )
    assert count_in(page, "#chart-metric path.best") == 1  # the best-so-far curve
    assert count_in(page, "#chart-parallel .y-axis") == 4  # lr, batch_size, optimizer, metric
    started = sum(1 for s in STATUSES if s is not TrialStatus.WAITING)
    assert count_in(page, "#chart-duration .bar") == started
    page.wait_for_function("() => document.querySelectorAll('#chart-intermediate .trace').length === 50")
    assert page.locator("#intermediate-note").inner_text() == f"showing the newest 50 of {started} trials"
    first_bar = page.locator("#chart-duration .bar").first  # trial 0's bar, and its tooltip
    first_bar.hover()
    assert re.fullmatch(
        r"Trial 0 \(t00000 \w+\)\n[\d.]+ s", page.locator("#chart-duration .chart-tip").inner_text()
    )
    page.locator("#chart-intermediate path.trace").first.hover()
    assert re.search(r"\nstep \d+: ", page.locator("#chart-intermediate .chart-tip").inner_text())
    screenshot(page, "charts-viewed")

    page.locator("#parallel-top").select_option("20")
    top = min(20, len(SUCCEEDED))
    page.wait_for_function(
        "n => document.querySelector('#chart-parallel').data[0].dimensions[0].values.length === n", arg=top
    )
    page.locator("#chart-parallel").scroll_into_view_if_needed()
    page.locator("input[data-axis=batch_size]").uncheck()
    page.wait_for_function("() => document.querySelectorAll('#chart-parallel .y-axis').length === 3")
    brush_and_reorder_the_parallel_axes(page)

    # the last intermediate result equals the final metric: filter on it at index 11
    page.locator("#intermediate-step").fill(str(STEPS - 1))
    page.locator("#intermediate-min").fill("0.7025")
    page.locator("#intermediate-min").press("Enter")
    page.locator("#intermediate-trials").select_option("500")
    high = sum(1 for i in range(N) if STATUSES[i] is not TrialStatus.WAITING and final_of(i) >= 0.7025)
    page.wait_for_function(
        "n => document.querySelectorAll('#chart-intermediate .trace').length === n", arg=high
    )


def test_the_metric_chart_zooms_into_a_dragged_rectangle_and_back_on_a_double_click(
    viewed: Viewed, page: Any
) -> None:
    """A drag over the plot zooms into its rectangle (and opens no trial); a redraw with other options keeps the
    zoom; a double click, or the Reset zoom button, shows the whole data again."""
    page.goto(f"{viewed.url}/#/charts")
    page.wait_for_function(
        "n => document.querySelectorAll('#chart-metric .point').length === n", arg=len(SUCCEEDED)
    )
    chart = page.locator("#chart-metric")
    zoom = "() => document.querySelector('#chart-metric')._svgChart.zoom"
    whole = page.evaluate("() => document.querySelector('#chart-metric')._svgChart.spec.x.domain")
    reset = chart.locator(".zoom-reset")
    assert page.evaluate(zoom) is None and not reset.is_visible()
    ticks_before = chart.locator(".x-tick").all_inner_texts()
    box = chart.locator("svg").bounding_box()
    left, right = box["x"] + 60, box["x"] + box["width"] - 16  # svgchart.js's margins
    top, bottom = box["y"] + 30, box["y"] + box["height"] - 44
    hash_before = page.evaluate("() => location.hash")
    page.mouse.move(left + (right - left) * 0.25, top + (bottom - top) * 0.1)
    page.mouse.down()
    page.mouse.move(left + (right - left) * 0.6, top + (bottom - top) * 0.9, steps=8)
    page.mouse.up()
    zoomed = page.evaluate(zoom)
    assert zoomed is not None
    assert whole[0] < zoomed["x"][0] < zoomed["x"][1] < whole[1]
    assert reset.is_visible() and chart.locator(".x-tick").all_inner_texts() != ticks_before
    assert page.evaluate("() => location.hash") == hash_before  # the drag opened no trial

    best = chart.locator("path.best").get_attribute("d")
    page.locator("#metric-mode").select_option("minimize")  # a redraw (the best so far is another curve)
    page.wait_for_function(
        "d => document.querySelector('#chart-metric path.best').getAttribute('d') !== d", arg=best
    )
    assert page.evaluate(zoom) == zoomed and reset.is_visible()
    page.mouse.dblclick((left + right) / 2, (top + bottom) / 2)
    assert page.evaluate(zoom) is None and not reset.is_visible()
    assert chart.locator(".x-tick").all_inner_texts() == ticks_before

    page.mouse.move(left + (right - left) * 0.3, top + (bottom - top) * 0.3)
    page.mouse.down()
    page.mouse.move(left + (right - left) * 0.5, top + (bottom - top) * 0.7, steps=5)
    page.mouse.up()
    assert page.evaluate(zoom) is not None
    reset.click()
    assert page.evaluate(zoom) is None and not reset.is_visible()


def test_experiments_page_lists_every_experiment_of_the_manifest(
    viewed: Viewed, page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_HOME", str(viewed.home))
    other_id, _ = new_experiment(tmp_path, experiment_name="resnet-search")
    page.goto(f"{viewed.url}/#/experiments")
    page.locator(f"#experiments-table tr[data-experiment='{other_id}']").wait_for()
    current = page.locator(f"#experiments-table tr[data-experiment='{viewed.experiment_id}']")
    assert current.locator("a").get_attribute("href") == "#/overview"
    assert "resnet-search" in page.locator(f"tr[data-experiment='{other_id}']").inner_text()
    assert count_in(page, "#experiments-table tbody tr") == 2
    screenshot(page, "experiments")


def test_nni_web_ui_paths_open_the_matching_page(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/detail")
    page.locator("#trials-table tbody tr").first.wait_for()
    assert page.url.endswith("/#/trials")
    page.goto(f"{viewed.url}/oview")
    page.locator("#best-trials").wait_for()


def test_the_experiment_summary_downloads_profile_trials_and_metrics(viewed: Viewed, page: Any) -> None:
    page.goto(f"{viewed.url}/#/overview")
    page.locator("#best-trials").wait_for()
    with page.expect_download() as download:
        page.locator("#download-summary").click()
    summary = json.loads(Path(download.value.path()).read_text())
    assert summary["experimentParameters"]["id"] == viewed.experiment_id
    assert len(summary["trialMessage"]) == N
    started = sum(1 for s in STATUSES if s is not TrialStatus.WAITING)
    assert len(summary["intermediateResult"]) == started * STEPS + len(SUCCEEDED)


def test_about_escape_numbers_latest_results_and_log_axes(viewed: Viewed, page: Any) -> None:
    from trialfleet.testing.webui_scale import wait_js

    page.goto(f"{viewed.url}/#/overview")
    wait_js(page, "() => document.querySelector('#remaining')")
    # a viewed experiment has no time left to count down
    assert page.locator("#remaining").inner_text() == "\u2013"
    page.locator("#about").click()
    from trialfleet import __version__

    assert page.locator("#about-version").inner_text() == __version__
    page.keyboard.press("Escape")
    page.locator(".dialog").wait_for(state="detached")
    assert re.fullmatch(r"webui/v-\w+/favicon.svg", page.locator("link[rel=icon]").get_attribute("href"))
    shown = page.evaluate(
        "async () => { const { fmtNumber } = await import('./webui/js/dom.js');"
        " return [0.0001, 0.000123456, 1.5e-7, 1234567.891, 2.5e9 + 0.25, 0.1 + 0.2].map(fmtNumber); }"
    )
    assert shown == ["0.0001", "0.000123456", "1.5e-7", "1234570", "2.5e+9", "0.3"]

    page.goto(f"{viewed.url}/#/trials")
    wait_js(page, "() => document.querySelector('#trials-table tbody tr[data-trial]')")
    assert "Latest" in texts(page, "#trials-table thead th")
    running = page.locator(f"#trials-table tr[data-trial='t{N - 1:05d}']")
    cells = dict(
        zip(texts(page, "#trials-table thead th"), running.locator("td").all_inner_texts(), strict=False)
    )
    assert cells["Latest"] == str(
        final_of(N - 1)
    )  # fill(): the last intermediate result equals the final one
    page.locator("#trial-search").fill("#7")
    wait_range(page, "1\u20131 of 1")
    page.locator("#trial-search").fill("optimizer:adam lr:0.001..0.02")
    adam = [i for i in range(N) if params_of(i)["optimizer"] == "adam" and params_of(i)["lr"] <= 0.02]  # type: ignore[operator]
    wait_range(page, f"1\u2013{len(adam)} of {len(adam)}")

    page.goto(f"{viewed.url}/#/trials/t00010")
    page.locator("#trial-detail").wait_for()
    page.keyboard.press("Escape")
    page.locator("#trial-detail").wait_for(state="detached")

    page.goto(f"{viewed.url}/#/charts")
    wait_js(page, "() => document.getElementById('chart-parallel')?.data?.[0]?.dimensions")
    labels = page.evaluate(
        "() => document.getElementById('chart-parallel').data[0].dimensions.map((d) => d.label)"
    )
    assert labels[:2] == ["lr (log)", "batch_size (log)"]  # log-uniform, and choices 16, 32, 64
    # the intermediate chart is drawn after its own query: read its axis once it holds lines
    wait_js(page, "() => document.getElementById('chart-intermediate')?.data?.length > 0")
    ticks = page.evaluate(
        "() => [...document.querySelectorAll('#chart-intermediate .x-tick')].map((t) => t.textContent)"
    )
    assert ticks and all(tick.isdigit() for tick in ticks)


def test_experiments_page_shows_what_each_experiment_holds_and_waits_for(
    page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALFLEET_LEASE_DIR", str(tmp_path / "leases"))  # inherited by the manager
    holder_id, _ = new_experiment(tmp_path, experiment_name="holder")
    waiter_id, waiter_dir = new_experiment(tmp_path, experiment_name="waiter")
    gpus = [GpuInfo(0, 100, 0, 0.0, 0)]

    def choose(count: int, assigned: Any, leased: Any) -> list[int] | str:
        return allocate_gpus(gpus, count, assigned=assigned, leased=leased)

    holder, waiter = GpuLeases(holder_id), GpuLeases(waiter_id)
    assert isinstance(holder.take("a", "a_0", 1, choose), Taken)
    try:
        with manager_process(waiter_dir, "view") as manager:
            # asked now, however long the manager took to start: a wait not asked again lapses
            assert "leased to experiment" in str(waiter.take("b", "b_0", 1, choose))
            page.goto(f"{manager.url}/#/experiments")
            holding = page.locator(f"td[data-gpus='{holder_id}']")
            page.wait_for_function(
                "id => (document.querySelector(`td[data-gpus='${id}']`) || {}).textContent?.includes('GPU 0')",
                arg=holder_id,
            )
            assert holding.inner_text().strip() == "localhost: GPU 0"
            waiting = page.locator(f"td[data-gpus='{waiter_id}']").inner_text()
            assert waiting.startswith("localhost: no GPU, waits for 1 since")
    finally:
        holder.close()
        waiter.close()
