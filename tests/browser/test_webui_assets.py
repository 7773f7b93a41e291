"""How the web UI's assets travel: gzipped, under versioned URLs kept for a year, and plotly.js as the
cartesian bundle built from its npm package (scripts/build_webui.py), in a real Chromium and through the app."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from webui_experiments import fill, manager_process, new_experiment

from trialfleet.manager.experiment_manager import ExperimentManager
from trialfleet.server.app import create_app
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore
from trialfleet.webui import STATIC_DIR
from trialfleet.webui.assets import PARTIAL_PLOTLY, WHOLE_PLOTLY, Assets, plotly_js_path

N = 30
BUILD = "the partial plotly.js is built by `python scripts/build_webui.py` (npm ci), which every install runs"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, experiment_dir = new_experiment(tmp_path_factory.mktemp("assets"))
    store = ExperimentStore.for_experiment_dir(experiment_dir)
    fill(store, N, 3, [TrialStatus.SUCCEEDED] * (N - 1) + [TrialStatus.RUNNING])
    store.close()
    return experiment_dir


@pytest.fixture
def client(experiment: Path) -> Iterator[TestClient]:
    with TestClient(create_app(ExperimentManager(experiment, readonly=True))) as test_client:
        yield test_client


def named_by_the_page(html: str) -> list[str]:
    return re.findall(r'(?:src|href|content)="(webui/[^"]+)"', html)


def raw_get(client: TestClient, url: str, **headers: str) -> Any:
    """A GET whose body is kept as sent (TestClient would decode gzip)."""
    with client.stream("GET", url, headers=headers) as answer:
        answer.raw = b"".join(answer.iter_raw())
        return answer


def test_the_page_names_versioned_assets_sent_gzipped_and_kept_for_a_year(client: TestClient) -> None:
    page = raw_get(client, "/", **{"Accept-Encoding": "gzip"})
    assert page.headers["content-encoding"] == "gzip" and page.headers["cache-control"] == "no-cache"
    urls = named_by_the_page(gzip.decompress(page.raw).decode())
    assert {u.split("/", 2)[2] for u in urls} == {
        "favicon.svg",
        "css/app.css",
        "js/app.js",
        PARTIAL_PLOTLY,
    }, BUILD
    assert len({u.split("/")[1] for u in urls}) == 1  # one version for all
    for url in urls:
        answer = raw_get(client, "/" + url, **{"Accept-Encoding": "gzip, deflate, br"})
        on_disk = (STATIC_DIR / url.split("/", 2)[2]).read_bytes()
        assert answer.status_code == 200 and "immutable" in answer.headers["cache-control"], url
        assert answer.headers.get("content-encoding") == "gzip", url
        assert gzip.decompress(answer.raw) == on_disk, url
    plotly = next(u for u in urls if u.endswith(PARTIAL_PLOTLY))
    plain = raw_get(client, "/" + plotly, **{"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.raw == (STATIC_DIR / PARTIAL_PLOTLY).read_bytes()


def test_the_partial_plotly_is_a_third_of_the_whole_and_ships_its_license(client: TestClient) -> None:
    partial = STATIC_DIR / PARTIAL_PLOTLY
    assert partial.is_file(), BUILD
    whole = plotly_js_path()
    assert whole is not None, "plotly is a dependency of the web UI: pip install 'plotly>=5'"
    assert partial.stat().st_size < whole.stat().st_size / 3
    assert "MIT" in partial.with_name(partial.name + ".LICENSE.txt").read_text()
    # the gzipped copy sent is the one built beside it, not compressed per request
    sent = raw_get(client, f"/webui/{PARTIAL_PLOTLY}", **{"Accept-Encoding": "gzip"})
    assert sent.raw == partial.with_name(partial.name + ".gz").read_bytes()


def test_unversioned_and_stale_urls_are_revalidated_and_nothing_outside_is_served(client: TestClient) -> None:
    fresh = client.get("/webui/js/app.js")
    assert fresh.headers["cache-control"] == "no-cache" and fresh.headers["etag"]
    assert client.get("/webui/js/app.js", headers={"If-None-Match": fresh.headers["etag"]}).status_code == 304
    stale = client.get("/webui/v-000000000000/js/app.js")
    assert stale.status_code == 200 and stale.headers["cache-control"] == "no-cache"
    for outside in ("/webui/../__init__.py", "/webui/v-0/%2e%2e/__init__.py", "/webui/js/nothing.js"):
        assert client.get(outside).status_code == 404, outside


def test_without_the_built_bundle_the_whole_plotly_is_served_gzipped(tmp_path: Path) -> None:
    (tmp_path / "js").mkdir()
    (tmp_path / "js" / "app.js").write_text("console.log('app');\n" * 100)
    assets = Assets(tmp_path)
    assert assets.plotly == WHOLE_PLOTLY
    whole = plotly_js_path()
    assert whole is not None
    from starlette.requests import Request

    request = Request({"type": "http", "headers": [(b"accept-encoding", b"gzip")]})
    answer = assets.serve(f"{assets.version}/{WHOLE_PLOTLY}", request)
    assert answer.headers["content-encoding"] == "gzip" and "immutable" in answer.headers["cache-control"]
    assert gzip.decompress(answer.body) == whole.read_bytes()
    assert assets.serve(f"{assets.version}/{WHOLE_PLOTLY}", request).body is answer.body  # compressed once


@pytest.mark.browser
def test_a_first_visit_gets_every_asset_compressed_and_draws_with_the_partial_bundle(
    experiment: Path, page: Any
) -> None:
    """Cold (a new browser context: nothing cached), the charts page loads only what it draws (its charts are
    our own: no plotly.js), every asset of it gzipped; a trial's curves load plotly.js, the cartesian bundle,
    and the page asks nothing of another host."""
    with manager_process(experiment, "view") as manager:
        answers: list[Any] = []
        page.on("response", lambda answer: answers.append(answer))
        page.goto(f"{manager.url}/#/charts")
        page.wait_for_function("() => document.getElementById('chart-duration')?.data?.length")
        page.wait_for_function("() => document.getElementById('chart-intermediate')?.data?.length")
        assert not [a.url for a in answers if "plotly" in a.url]
        page.goto(f"{manager.url}/#/trials/t00001")
        page.locator("#trial-detail .tab[data-tab=intermediate]").click()
        page.wait_for_function("() => document.querySelector('#detail-plot .scatterlayer .trace')")
        assert page.evaluate("() => typeof Plotly.react") == "function"
        assets = [a for a in answers if "/webui/" in a.url]
        scripts = [a.url.rsplit("/", 2)[-2:] for a in assets if "plotly" in a.url]
        assert scripts == [["vendor", "plotly-cartesian.min.js"]], BUILD
        assert {a.url.rsplit(".", 1)[-1] for a in assets} == {"js", "css", "svg"}
        for answer in assets:
            assert answer.headers.get("content-encoding") == "gzip", answer.url
        assert all(a.url.startswith(manager.url) for a in answers)
