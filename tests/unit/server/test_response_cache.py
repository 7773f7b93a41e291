"""The read routes' response cache: a body is reused only while the database is unchanged."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from starlette.requests import Request

from tests.unit.server.conftest import API, T0, Served
from trialfleet.manager.decisions import parameter_record
from trialfleet.server.cache import ResponseCache
from trialfleet.server.context import context
from trialfleet.storage import ExperimentStore, NewMetric
from trialfleet.testing.harness import HANG_GUARD

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


class _Counter:
    def __init__(self) -> None:
        self.version = 1

    def value(self) -> int:
        return self.version


def _request(path: str, *headers: tuple[bytes, bytes]) -> Request:
    return Request(
        {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": list(headers)}
    )


class _SlowBuild:
    """A build that waits until released, counting how often it ran."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> tuple[Any, dict[str, str]]:
        self.calls += 1
        self.started.set()
        assert self.release.wait(HANG_GUARD)
        return {"built": self.calls, "padding": "x" * 2000}, {"X-Total-Count": "1"}


async def _started(build: _SlowBuild) -> None:
    assert await asyncio.to_thread(build.started.wait, HANG_GUARD)


async def test_clients_missing_at_once_share_one_build() -> None:
    counter, build = _Counter(), _SlowBuild()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    first = asyncio.ensure_future(cache.respond(_request("/a"), build))
    await _started(build)
    others = [asyncio.ensure_future(cache.respond(_request("/a"), build)) for _ in range(20)]
    await asyncio.sleep(0.05)  # all of them are waiting now
    first.cancel()  # the client that started the build goes away: the others still get it
    build.release.set()
    answers = await asyncio.gather(*others)
    assert build.calls == 1 and cache.builds == 1
    assert {a.body for a in answers} == {answers[0].body} and json.loads(bytes(answers[0].body))["built"] == 1
    counter.version = 2  # a commit: the next request builds again
    again = await cache.respond(_request("/a"), build)
    assert build.calls == 2 and json.loads(bytes(again.body))["built"] == 2


async def test_a_request_after_a_commit_does_not_take_a_build_of_the_older_database() -> None:
    counter, build = _Counter(), _SlowBuild()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    older = asyncio.ensure_future(cache.respond(_request("/a"), build))
    await _started(build)
    counter.version = 2
    newer = asyncio.ensure_future(cache.respond(_request("/a"), build))
    await asyncio.sleep(0.05)
    build.release.set()
    old_answer, new_answer = await asyncio.gather(older, newer)
    assert build.calls == 2
    assert old_answer.headers["etag"] != new_answer.headers["etag"] and new_answer.headers["etag"].endswith(
        '-2"'
    )


@pytest.fixture
def compressions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the bodies gzipped from now on."""
    sizes: list[int] = []
    real = gzip.compress

    def counted(data: bytes, **options: Any) -> bytes:
        sizes.append(len(data))
        return real(data, **options)

    monkeypatch.setattr(gzip, "compress", counted)
    return sizes


async def test_a_body_is_gzipped_once_for_all_the_clients_that_ask(compressions: list[int]) -> None:
    counter, build = _Counter(), _SlowBuild()
    build.release.set()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    gzip_ok = (b"accept-encoding", b"gzip")
    answers = await asyncio.gather(*(cache.respond(_request("/a", gzip_ok), build) for _ in range(20)))
    assert len(compressions) == 1 and build.calls == 1
    assert {a.headers["content-encoding"] for a in answers} == {"gzip"}
    assert json.loads(gzip.decompress(answers[0].body))["built"] == 1


async def test_a_build_from_a_newer_database_drops_every_older_body() -> None:
    counter, build = _Counter(), _SlowBuild()
    build.release.set()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    first = await cache.respond(_request("/a"), build)
    await cache.respond(_request("/b"), build)
    assert cache.kept_bytes == 2 * len(first.body)
    counter.version = 2  # a commit: neither body can be served again
    newer = await cache.respond(_request("/a"), build)
    assert cache.kept_bytes == len(newer.body)  # /b's went with the build, before anyone asked for /b
    assert json.loads(bytes((await cache.respond(_request("/b"), build)).body))["built"] == 4


async def test_requests_during_a_build_share_the_next_one_which_reads_the_database_after_them() -> None:
    counter, build = _Counter(), _SlowBuild()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    first = asyncio.ensure_future(cache.respond(_request("/a"), build))
    await _started(build)
    waiting = []
    for version in (2, 3, 4):  # trials commit while it builds, and requests come after each commit
        counter.version = version
        waiting += [asyncio.ensure_future(cache.respond(_request("/a"), build)) for _ in range(5)]
        await asyncio.sleep(0.01)
    build.release.set()
    answers = await asyncio.gather(*waiting)
    assert (await first).headers["etag"].endswith('-1"')
    assert build.calls == 2  # not one per commit
    assert {a.headers["etag"] for a in answers} == {answers[0].headers["etag"]}
    assert answers[0].headers["etag"].endswith('-4"')  # as new as the database after the last of them came


def test_a_url_answered_once_is_answered_again_without_routing_it(
    populated: tuple[Served, TestClient],
) -> None:
    served, client = populated
    routed = []
    app = client.app
    real = app.state.trialfleet  # type: ignore[attr-defined]

    async def counted(request: Request) -> Any:
        routed.append(request.url.path)
        return real

    app.dependency_overrides[context] = counted  # type: ignore[attr-defined]
    first = client.get(f"{API}/metric-data/rC").json()
    assert client.get(f"{API}/metric-data/rC").json() == first
    _add_metric(served)  # a commit: the body is built again, the way the route built it
    after = client.get(f"{API}/metric-data/rC").json()
    assert [json.loads(m["data"]) for m in after] == ["0.7", "0.8"]
    assert routed == [f"{API}/metric-data/rC"]
    assert client.get(f"{API}/metric-data/rC?type=FINAL").status_code == 200  # another URL: routed
    assert len(routed) == 2


async def test_a_kept_build_that_fails_sends_the_request_to_its_route() -> None:
    counter = _Counter()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    outcomes: list[Any] = [({"ok": 1}, {}), HTTPException(404, "gone")]

    def build() -> tuple[Any, dict[str, str]]:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    await cache.respond(_request("/a"), build)
    scope = _request("/a").scope
    kept = await cache.kept_response(scope)
    assert kept is not None and json.loads(bytes(kept.body)) == {"ok": 1}
    counter.version = 2
    await asyncio.sleep(0)  # a commit is seen from the loop's next turn on
    assert await cache.kept_response(scope) is None  # the route answers the error its own way
    assert await cache.kept_response(scope) is None and not outcomes  # ...from now on, without a build first
    assert await cache.kept_response({**scope, "path": "/b"}) is None  # never routed: unknown
    assert await cache.kept_response({**scope, "method": "POST"}) is None


async def test_an_unchanged_body_is_answered_304_without_gzipping_it(compressions: list[int]) -> None:
    counter, build = _Counter(), _SlowBuild()
    build.release.set()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    etag = (await cache.respond(_request("/a"), build)).headers["etag"]
    again = _request("/a", (b"accept-encoding", b"gzip"), (b"if-none-match", etag.encode()))
    assert (await cache.respond(again, build)).status_code == 304
    assert compressions == []


class _CountingCounter(_Counter):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def value(self) -> int:
        self.reads += 1
        return self.version


async def test_requests_answered_in_one_turn_of_the_loop_read_the_version_once_and_a_commit_is_seen_next_turn() -> (
    None
):
    counter = _CountingCounter()
    cache = ResponseCache(counter)  # type: ignore[arg-type]
    build = lambda: ({"version": counter.version}, {})  # noqa: E731
    await cache.respond(_request("/a"), build)  # built (its build reads the version itself, once)
    reads = counter.reads
    burst = await asyncio.gather(*(cache.respond(_request("/a"), build) for _ in range(50)))  # one turn
    assert counter.reads == reads + 1
    assert {json.loads(bytes(a.body))["version"] for a in burst} == {1}
    counter.version = 2  # a commit between two turns
    await asyncio.sleep(0)
    after = await cache.respond(_request("/a"), build)
    assert json.loads(bytes(after.body))["version"] == 2
