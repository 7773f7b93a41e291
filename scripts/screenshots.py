"""Regenerate the README's screenshots (docs/images/*.png) on a 10,000-trial experiment, in headless Chromium.

    python scripts/screenshots.py                  # starts its own experiment (a few minutes)
    python scripts/screenshots.py --url URL --control DIR   # or uses one already serving

The experiment is trialfleet.testing.webui_scale's: 10,000 simulated trials running through the real manager;
the script ends 600 of them (most succeeded, some failed or killed) so every chart has data, then shoots the
overview, the trials page, the charts and a trial's drawer at 1440x900.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from trialfleet.testing.webui_scale import RunningExperiment, running_experiment, wait_js

IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]
TRIALS = 10_000


def end_some(experiment: RunningExperiment, count: int) -> None:
    for i in range(count):
        trial_id = f"s{i:05d}"
        if i % 29 == 3:
            experiment.end(trial_id, "FAILED")
        else:
            experiment.end(
                trial_id, "SUCCEEDED", round(0.55 + 0.35 * ((i * 7919) % 1000) / 1000 - i / 20000, 4)
            )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        counts = experiment.get("/api/v1/trialfleet/experiment")["counts"]
        if counts.get("SUCCEEDED", 0) + counts.get("FAILED", 0) >= count:
            return
        time.sleep(0.5)


def shoot(url: str) -> None:
    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}/#/overview")
        wait_js(page, "() => document.getElementById('overview-metric-plot')?.data?.length", timeout=300)
        time.sleep(1)
        page.screenshot(path=str(IMAGES / "overview.png"))
        page.locator("nav a[data-page=trials]").click()
        wait_js(page, "() => document.querySelector('#trials-table tbody tr[data-trial]')", timeout=300)
        time.sleep(1)
        page.screenshot(path=str(IMAGES / "trials.png"))
        page.locator("nav a[data-page=charts]").click()
        wait_js(
            page,
            "() => ['chart-metric', 'chart-parallel', 'chart-duration', 'chart-intermediate']"
            ".every((id) => document.getElementById(id)?.data?.length)",
            timeout=300,
        )
        time.sleep(2)
        page.screenshot(path=str(IMAGES / "charts.png"), full_page=True)
        page.goto(f"{url}/#/trials/s09990")  # running: it has reported intermediate results
        page.locator("#trial-detail .tab[data-tab=intermediate]").click()
        wait_js(page, "() => document.getElementById('detail-plot')?.data?.length", timeout=300)
        time.sleep(1)
        page.screenshot(path=str(IMAGES / "trial-detail.png"))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a manager already serving a webui_scale experiment")
    parser.add_argument("--control", type=Path, help="that experiment's control directory")
    args = parser.parse_args()
    if args.url:
        experiment = RunningExperiment(args.url, Path("."), args.control, TRIALS)
        end_some(experiment, 600)
        shoot(args.url)
        return
    with (
        tempfile.TemporaryDirectory(prefix="screenshots-") as work,
        running_experiment(Path(work), TRIALS, metric_interval=10.0) as experiment,
    ):
        end_some(experiment, 600)
        time.sleep(30)  # a few intermediate results per running trial
        shoot(experiment.url)


if __name__ == "__main__":
    main()
