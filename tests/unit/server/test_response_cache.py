"""The read routes' response cache: a body is reused only while the database is unchanged."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.unit.server.conftest import API, T0, Served
from trialfleet.manager.decisions import parameter_record
from trialfleet.storage import ExperimentStore, NewMetric

ROUTES = [
    "/trial-jobs",
    "/trial-jobs?status=RUNNING",
    "/trial-jobs/rC",
    "/metric-data",
    "/metric-data/rC",
    "/metric-data-range/0/9",
    "/metric-data-latest/",
    "/job-statistics",
    "/export-data",
]


def _add_metric(served: Served) -> None:
    """A write through a connection of its own, as the manager's reconciler makes it."""
    store = ExperimentStore.for_experiment_dir(served.experiment_dir)
    store.add_metrics([NewMetric("rC", 2, "PERIODICAL", 1, "0.8", T0 + 12)], {})
    store.close()


def test_a_commit_is_seen_by_the_next_request(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    before = client.get(f"{API}/metric-data/rC").json()
    assert client.get(f"{API}/metric-data/rC").json() == before  # answered from the cache
    _add_metric(served)
    after = client.get(f"{API}/metric-data/rC").json()
    assert [json.loads(m["data"]) for m in after] == ["0.7", "0.8"]
    cache = client.app.state.trialfleet.cache  # type: ignore[attr-defined]
    assert cache.hits >= 1 and cache.misses >= 2


def test_every_cached_route_answers_as_built_and_changes_with_the_database(
    populated: tuple[Served, TestClient],
) -> None:
    served, client = populated
    first = {route: client.get(API + route) for route in ROUTES}
    again = {route: client.get(API + route) for route in ROUTES}
    for route in ROUTES:
        assert first[route].status_code == 200, route
        assert again[route].content == first[route].content, route
        assert again[route].headers["etag"] == first[route].headers["etag"], route
    store = ExperimentStore.for_experiment_dir(served.experiment_dir)
    store.add_trial("nE", parameter_record(4, {"x": 0.1}), T0 + 20)
    store.close()
    after = {route: client.get(API + route) for route in ROUTES}
    for route in ROUTES:
        assert after[route].headers["etag"] != first[route].headers["etag"], route
    assert len(after["/trial-jobs"].json()) == len(first["/trial-jobs"].json()) + 1
    assert after["/trial-jobs"].headers["x-total-count"] == str(len(after["/trial-jobs"].json()))


def test_etag_gives_304_until_the_database_changes(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    response = client.get(f"{API}/trial-jobs")
    etag = response.headers["etag"]
    unchanged = client.get(f"{API}/trial-jobs", headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged.headers["x-total-count"] == response.headers["x-total-count"]
    _add_metric(served)
    changed = client.get(f"{API}/trial-jobs", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_bodies_are_gzipped_for_clients_that_ask(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    store = ExperimentStore.for_experiment_dir(served.experiment_dir)
    store.add_metrics([NewMetric("rC", 2, "PERIODICAL", i, "0.5", T0 + 12 + i) for i in range(1, 60)], {})
    store.close()
    plain = client.get(f"{API}/metric-data", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    raw = client.get(f"{API}/metric-data", headers={"Accept-Encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip"
    assert raw.json() == plain.json()  # httpx decodes it
    assert int(raw.headers["content-length"]) < len(plain.content)


def test_an_unknown_trial_is_404_and_not_cached(populated: tuple[Served, TestClient]) -> None:
    served, client = populated
    assert client.get(f"{API}/trial-jobs/zZ").status_code == 404
    store = ExperimentStore.for_experiment_dir(served.experiment_dir)
    store.add_trial("zZ", parameter_record(9, {"x": 0.3}), T0 + 30)
    store.close()
    assert client.get(f"{API}/trial-jobs/zZ").json()["trialJobId"] == "zZ"
