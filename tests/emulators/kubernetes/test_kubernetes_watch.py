"""Watch semantics as the official client's ``watch.Watch`` meets them: resume, 410, bookmarks, drops."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import wait_for

NS = "default"


def take(stream: Any, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch (the timeout only guards against a hang)."""
    events = []
    for event in stream:
        events.append(event)
        if len(events) == count:
            break
    return events


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"v": "0"}}


def test_initial_events_then_changes_in_order(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, cm("before"))
    seen: list[tuple[str, str]] = []
    stream = watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=5)
    for event in stream:
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 1:
            core.create_namespaced_config_map(NS, cm("after"))
            core.patch_namespaced_config_map("after", NS, {"data": {"v": "1"}})
            core.delete_namespaced_config_map("after", NS)
        if len(seen) == 4:
            break
    assert seen == [("ADDED", "before"), ("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_resume_from_a_version_replays_only_later_changes(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(NS, cm("a"))
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("b"))
    core.create_namespaced_config_map(NS, cm("c"))
    events = take(
        watch.Watch().stream(
            core.list_namespaced_config_map, NS, resource_version=version, timeout_seconds=10
        ),
        2,
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "b"), ("ADDED", "c")]
    assert int(events[0]["object"].metadata.resource_version) > int(version)


def test_expired_version_is_410_for_a_client_with_a_timeout(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("x"))
    cluster.compact()
    with pytest.raises(client.ApiException) as gone:  # no retry when timeout_seconds is given
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, NS, resource_version=version, timeout_seconds=2
            )
        )
    assert gone.value.status == 410
    assert gone.value.reason.startswith(f"Expired: too old resource version: {version} (")


def test_forced_410_retried_once_from_the_last_version(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    """Without timeout_seconds the client retries a 410 once, from the last version it saw."""
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    cluster.faults.expire_next_watch(1)
    watcher = watch.Watch()

    def create_once_rewatched() -> None:
        wait_for(
            lambda: (
                sum(("watch", "True") in r.query for r in cluster.requests.all()) == 2
                and cluster._server is not None
                and cluster._server.watches
            ),
            message="the second watch",
        )
        core.create_namespaced_config_map(NS, cm("late"))

    threading.Thread(target=create_once_rewatched).start()
    for event in watcher.stream(core.list_namespaced_config_map, NS, resource_version=version):
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "late")
        watcher.stop()
        break
    watches = [r for r in cluster.requests.all() if ("watch", "True") in r.query]
    assert [dict(r.query)["resourceVersion"] for r in watches] == [version, version]


def test_second_410_raises(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    cluster.faults.expire_next_watch(2)
    with pytest.raises(client.ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=version))
    assert gone.value.status == 410


def test_selector_transitions_are_added_and_deleted(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(NS, cm("t", trial="1"))
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    core.patch_namespaced_config_map("t", NS, {"metadata": {"labels": {"trial": "2"}}})
    core.patch_namespaced_config_map("t", NS, {"metadata": {"labels": {"trial": "1"}}})
    events = take(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            NS,
            label_selector="trial=1",
            resource_version=version,
            timeout_seconds=10,
        ),
        2,
    )
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


def test_bookmarks_and_initial_events_end(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    cluster.bookmark_interval = 0.2
    core.create_namespaced_config_map(NS, cm("b"))
    events = take(
        watch.Watch().stream(
            core.list_namespaced_config_map,
            NS,
            allow_watch_bookmarks=True,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            resource_version="",
            timeout_seconds=10,
        ),
        3,
    )
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "BOOKMARK"]  # the last one: nothing happened
    assert events[1]["raw_object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_dropped_connection_breaks_the_stream(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, cm("one"))
    core.create_namespaced_config_map(NS, cm("two"))
    cluster.faults.drop_next_watch(after_events=1)
    received = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=5):
            received.append(event["object"].metadata.name)
    assert received == ["one"]


def test_dropping_open_watches_from_outside(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    failures: list[BaseException] = []

    def consume() -> None:
        try:
            list(watch.Watch().stream(core.list_namespaced_config_map, NS, timeout_seconds=10))
        except Exception as error:
            failures.append(error)

    worker = threading.Thread(target=consume)
    worker.start()
    wait_for(lambda: cluster._server is not None and cluster._server.watches, message="an open watch")
    assert cluster.drop_watches() == 1
    worker.join(10)
    assert failures and isinstance(failures[0], urllib3.exceptions.ProtocolError)


def test_watch_error_event_body(cluster: KubernetesEmulator, api: client.ApiClient) -> None:
    """The raw stream: HTTP 200, then one ERROR line carrying the 410 Status."""
    version = client.CoreV1Api(api).list_namespaced_config_map(NS).metadata.resource_version
    cluster.faults.expire_next_watch(1)
    response = client.CoreV1Api(api).list_namespaced_config_map(
        NS, watch=True, resource_version=version, _preload_content=False
    )
    assert response.status == 200
    line = json.loads(response.data.decode().splitlines()[0])
    assert line["type"] == "ERROR"
    assert {k: line["object"][k] for k in ("kind", "status", "reason", "code")} == {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
