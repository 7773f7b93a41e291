"""The ``/_emu`` control API, as another process drives it (plain HTTP, no token)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import pod_manifest, wait_for

NS = "default"


def call(
    cluster: KubernetesEmulator, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{cluster.url}/_emu/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_faults_through_the_control_api(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    assert call(cluster, "POST", "faults/deny", {"resource": "configmaps", "verb": "list"})[0] == 200
    with pytest.raises(client.ApiException) as denied:
        core.list_namespaced_config_map(NS)
    assert denied.value.status == 403
    call(cluster, "DELETE", "faults/deny")
    assert core.list_namespaced_config_map(NS).items == []
    call(cluster, "POST", "faults/lag-reads", {"reads": 1})
    core.create_namespaced_config_map(NS, {"metadata": {"name": "lagging"}})
    with pytest.raises(client.ApiException) as lagging:
        core.read_namespaced_config_map("lagging", NS)
    assert lagging.value.status == 404
    call(cluster, "POST", "faults/lag-reads", {"reads": 0})
    call(cluster, "POST", "token", {"token": "rotated"})
    with pytest.raises(client.ApiException) as expired:
        core.list_namespaced_pod(NS)
    assert expired.value.status == 401
    call(cluster, "POST", "token", {"token": "emulator-token"})
    assert core.list_namespaced_pod(NS).items == []


def test_watch_faults_through_the_control_api(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    call(cluster, "POST", "watches/expire-next", {"count": 1})
    stream = core.list_namespaced_config_map(NS, watch=True, resource_version=version, _preload_content=False)
    assert json.loads(stream.data.decode().splitlines()[0])["object"]["code"] == 410
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
    assert call(cluster, "POST", "watches/compact") == (200, {"ok": True})
    stream = core.list_namespaced_config_map(NS, watch=True, resource_version=version, _preload_content=False)
    assert json.loads(stream.data.decode().splitlines()[0])["object"]["reason"] == "Expired"
    assert call(cluster, "POST", "watches/drop") == (200, {"dropped": 0})


def test_cluster_faults_through_the_control_api(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    call(cluster, "POST", "scheduling/block", {"message": "0/1 nodes are available: 1 Insufficient memory."})
    core.create_namespaced_pod(NS, pod_manifest("held", "sleep 60"))

    def message() -> str | None:
        conditions = core.read_namespaced_pod("held", NS).status.conditions or []
        return conditions[0].message if conditions else None

    assert wait_for(message) == "0/1 nodes are available: 1 Insufficient memory."
    call(cluster, "DELETE", "scheduling/block")
    wait_for(lambda: core.read_namespaced_pod("held", NS).status.phase == "Running")
    assert call(cluster, "POST", f"pods/{NS}/held/oom", {})[0] == 200
    wait_for(lambda: core.read_namespaced_pod("held", NS).status.phase == "Failed")
    assert (
        core.read_namespaced_pod("held", NS).status.container_statuses[0].state.terminated.reason
        == "OOMKilled"
    )
    call(cluster, "POST", "images/fail", {"pattern": "bad:*"})
    core.create_namespaced_pod(NS, pod_manifest("pull", "true", container={"image": "bad:1"}))
    wait_for(
        lambda: (
            (core.read_namespaced_pod("pull", NS).status.container_statuses or [None])[0] is not None
            and core.read_namespaced_pod("pull", NS).status.container_statuses[0].state.waiting.reason
            == "ErrImagePull"
        )
    )
    call(cluster, "DELETE", "images/fail")
    assert call(cluster, "POST", "pods/default/missing/oom", {})[0] == 400


def test_operators_controllers_and_clock(cluster: KubernetesEmulator, api: client.ApiClient) -> None:
    assert call(cluster, "DELETE", "operators/adaptdl")[0] == 200
    wait_for(
        lambda: (
            "adaptdljobs.adaptdl.petuum.com"
            not in [
                c.metadata.name
                for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items
            ]
        )
    )
    assert call(cluster, "POST", "operators/adaptdl")[0] == 200
    assert call(cluster, "GET", "state")[1]["operators"] == ["adaptdl", "frameworkcontroller", "kubeflow"]
    assert call(cluster, "POST", "controllers/frameworkcontroller/restart")[0] == 200
    assert call(cluster, "POST", "controllers/nothing/restart")[0] == 400
    assert (
        call(cluster, "POST", "clock/advance", {"seconds": 1})[0] == 400
    )  # the system clock cannot be moved
    assert call(cluster, "GET", "nowhere")[0] == 404
    requests = call(cluster, "GET", "requests?since=0")[1]
    assert requests["items"][0]["path"] == "/_emu/operators/adaptdl" and requests["next"] >= len(
        requests["items"]
    )
    assert call(cluster, "DELETE", "requests")[0] == 200
    assert cluster.requests.all() == []
