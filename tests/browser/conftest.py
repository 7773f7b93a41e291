"""Real headless Chromium (Debian's ``chromium``) driven by Playwright against real manager processes.

A missing browser or Playwright fails every browser test with the command that installs it; nothing is
skipped. Screenshots land in ``test-artifacts/browser/`` (git-ignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]
INSTALL = "apt-get install -y chromium && pip install playwright   (never `playwright install`)"
VIEWPORT = {"width": 1440, "height": 900}


@pytest.fixture(autouse=True)
def trialfleet_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private experiments manifest; the manager processes inherit it."""
    home = tmp_path / "home"
    monkeypatch.setenv("TRIALFLEET_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # module scope: Playwright's sync API keeps an event loop running in this thread while it is open,
    # which would break every asyncio test collected after the browser tests
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"the browser tests need Playwright and Chromium: {INSTALL}")
    if not Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is None:
        pytest.fail(f"the browser tests need Debian's Chromium at {CHROMIUM}: {INSTALL}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page; any uncaught JavaScript error fails the test."""
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.set_default_timeout(20_000)
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
