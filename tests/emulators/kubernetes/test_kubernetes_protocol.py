"""The API server's wire protocol as the official ``kubernetes`` client drives it.

The golden conversations pin the exact requests the client makes (cluster-platforms.md §8.1): a client
upgrade that changes them fails here instead of silently diverging from what the emulator serves.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client, config, watch

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import pod_manifest, start, wait_for

G, V, NS = "kubeflow.org", "v1", "default"
TFJOBS = f"/apis/{G}/{V}/namespaces/{NS}/tfjobs"


def conversation(cluster: KubernetesEmulator, since: int) -> list[tuple[Any, ...]]:
    return [
        (r.method, r.path, sorted(r.query), r.headers.get("content-type"), r.body)
        for r in cluster.requests.since(since)
    ]


def tfjob(name: str, **labels: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "tf:2", "command": ["bash", "-c", "sleep 30"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "All"},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [container]}},
                }
            },
        },
    }


def raw_patch(api: client.ApiClient, path: str, content_type: str, body: Any) -> Any:
    """A PATCH with a chosen content type (the typed API always sends a merge patch for custom objects)."""
    return api.call_api(
        path,
        "PATCH",
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        response_type="object",
        _return_http_data_only=True,
    )


def test_golden_conversation_of_a_custom_object(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    start_at = len(cluster.requests)
    created = custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("golden", app="nni"))
    custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "golden")
    listed = custom.list_namespaced_custom_object(G, V, NS, "tfjobs", label_selector="app=nni")
    version = listed["metadata"]["resourceVersion"]
    events = list(
        watch.Watch().stream(
            custom.list_namespaced_custom_object,
            G,
            V,
            NS,
            "tfjobs",
            resource_version=version,
            timeout_seconds=1,
        )
    )
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    custom.patch_namespaced_custom_object(G, V, NS, "tfjobs", "golden", patch)
    custom.delete_namespaced_custom_object(G, V, NS, "tfjobs", "golden", propagation_policy="Foreground")
    assert created["metadata"]["uid"]
    assert all(e["type"] in ("MODIFIED", "BOOKMARK") for e in events)  # the operator writing the status
    assert conversation(cluster, start_at) == [
        ("POST", TFJOBS, [], "application/json", tfjob("golden", app="nni")),
        ("GET", f"{TFJOBS}/golden", [], "application/json", None),
        ("GET", TFJOBS, [("labelSelector", "app=nni")], "application/json", None),
        (
            "GET",
            TFJOBS,
            [("resourceVersion", version), ("timeoutSeconds", "1"), ("watch", "True")],
            "application/json",
            None,
        ),
        ("PATCH", f"{TFJOBS}/golden", [], "application/merge-patch+json", patch),
        ("DELETE", f"{TFJOBS}/golden", [("propagationPolicy", "Foreground")], "application/json", None),
    ]
    assert [r.status for r in cluster.requests.since(start_at)] == [201, 200, 200, 200, 200, 200]


def test_golden_conversation_of_a_pod(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    pods = f"/api/v1/namespaces/{NS}/pods"
    start_at = len(cluster.requests)
    manifest = pod_manifest("golden", "echo hello", metadata={"labels": {"trial": "t1"}})
    core.create_namespaced_pod(NS, manifest)
    core.read_namespaced_pod("golden", NS)
    listed = core.list_namespaced_pod(NS, label_selector="trial=t1", field_selector="status.phase!=Unknown")
    stream = watch.Watch().stream(
        core.list_namespaced_pod, NS, resource_version=listed.metadata.resource_version, timeout_seconds=1
    )
    list(stream)
    core.patch_namespaced_pod("golden", NS, {"metadata": {"labels": {"seen": "yes"}}})
    wait_for(lambda: core.read_namespaced_pod("golden", NS).status.phase == "Succeeded")
    before_log = len(cluster.requests)
    log = core.read_namespaced_pod_log("golden", NS, container="main", tail_lines=10)
    core.delete_namespaced_pod("golden", NS)
    assert log == "hello\n"
    recorded = conversation(cluster, start_at)
    assert recorded[:5] == [
        ("POST", pods, [], "application/json", manifest),
        ("GET", f"{pods}/golden", [], "application/json", None),
        (
            "GET",
            pods,
            [("fieldSelector", "status.phase!=Unknown"), ("labelSelector", "trial=t1")],
            "application/json",
            None,
        ),
        (
            "GET",
            pods,
            [
                ("resourceVersion", listed.metadata.resource_version),
                ("timeoutSeconds", "1"),
                ("watch", "True"),
            ],
            "application/json",
            None,
        ),
        (
            "PATCH",
            f"{pods}/golden",
            [],
            "application/strategic-merge-patch+json",
            {"metadata": {"labels": {"seen": "yes"}}},
        ),
    ]
    assert conversation(cluster, before_log) == [
        ("GET", f"{pods}/golden/log", [("container", "main"), ("tailLines", "10")], "application/json", None),
        ("DELETE", f"{pods}/golden", [], "application/json", None),
    ]


def test_the_token_is_required_and_never_logged(cluster: KubernetesEmulator, tmp_path: Any) -> None:
    settings = yaml.safe_load(cluster.kubeconfig.read_text())
    settings["users"][0]["user"]["token"] = "nope"
    (tmp_path / "wrong").write_text(yaml.safe_dump(settings))
    wrong = config.new_client_from_config(str(tmp_path / "wrong"))
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(wrong).list_namespaced_pod(NS)
    assert refused.value.status == 401
    assert json.loads(refused.value.body)["message"] == "Unauthorized"
    assert all("authorization" not in r.headers for r in cluster.requests.all())
    cluster.set_token("rotated")  # the kubeconfig's token has expired
    with pytest.raises(client.ApiException) as expired:
        client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig))).list_namespaced_pod(NS)
    assert expired.value.status == 401


def test_rbac_denial_is_the_real_403(cluster: KubernetesEmulator, custom: client.CustomObjectsApi) -> None:
    cluster.faults.deny("tfjobs", verb="create", group=G, namespace=NS)
    with pytest.raises(client.ApiException) as denied:
        custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("denied"))
    body = json.loads(denied.value.body)
    assert (denied.value.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'tfjobs.kubeflow.org is forbidden: User "trialfleet" cannot create resource "tfjobs" '
        'in API group "kubeflow.org" in the namespace "default"'
    )
    assert (
        custom.list_namespaced_custom_object(G, V, NS, "tfjobs")["items"] == []
    )  # other verbs still allowed


def test_status_bodies_for_missing_and_existing_objects(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    with pytest.raises(client.ApiException) as missing:
        custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "ghost")
    assert json.loads(missing.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'tfjobs.kubeflow.org "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "group": "kubeflow.org", "kind": "tfjobs"},
        "code": 404,
    }
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("twice"))
    everywhere = custom.list_cluster_custom_object(G, V, "tfjobs")
    assert [i["metadata"]["name"] for i in everywhere["items"]] == ["twice"] and everywhere[
        "kind"
    ] == "TFJobList"
    with pytest.raises(client.ApiException) as again:
        custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("twice"))
    body = json.loads(again.value.body)
    assert (again.value.status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'tfjobs.kubeflow.org "twice" already exists',
    )


def test_stale_update_conflicts_and_status_is_a_subresource(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    first = custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("occ"))

    def running() -> dict[str, Any] | None:  # from then on the operator leaves the job alone (its pod sleeps)
        job = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "occ")
        conditions = (job.get("status") or {}).get("conditions") or []
        return job if conditions and conditions[-1]["type"] == "Running" else None

    current = wait_for(running, message="Running")
    assert current["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    with pytest.raises(client.ApiException) as stale:
        custom.replace_namespaced_custom_object(G, V, NS, "tfjobs", "occ", first)
    body = json.loads(stale.value.body)
    assert (stale.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on tfjobs.kubeflow.org "occ": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    edited = dict(current, status={"conditions": []})
    edited["spec"]["runPolicy"]["backoffLimit"] = 3
    replaced = custom.replace_namespaced_custom_object(G, V, NS, "tfjobs", "occ", edited)
    assert replaced["status"] == current["status"]  # a spec write cannot change the status
    assert replaced["metadata"]["generation"] == current["metadata"]["generation"] + 1
    assert replaced["spec"]["runPolicy"]["suspend"] is False  # defaulted by the CRD schema


def test_patches_merge_json_and_strategic(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("patched", app="a"))
    merged = custom.patch_namespaced_custom_object(
        G, V, NS, "tfjobs", "patched", {"metadata": {"labels": {"app": None, "x": "1"}}}
    )
    assert merged["metadata"]["labels"] == {"x": "1"}
    path = f"{TFJOBS}/patched"
    operations = [{"op": "replace", "path": "/spec/runPolicy/cleanPodPolicy", "value": "None"}]
    jsoned = raw_patch(custom.api_client, path, "application/json-patch+json", operations)
    assert jsoned["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    with pytest.raises(client.ApiException) as failed_test:
        raw_patch(
            custom.api_client,
            path,
            "application/json-patch+json",
            [{"op": "test", "path": "/spec/runPolicy/cleanPodPolicy", "value": "All"}],
        )
    assert failed_test.value.status == 422
    with pytest.raises(client.ApiException) as unsupported:
        raw_patch(custom.api_client, path, "application/strategic-merge-patch+json", {"spec": {}})
    assert unsupported.value.status == 415
    core.create_namespaced_pod(
        NS, pod_manifest("sm", "sleep 30", container={"env": [{"name": "A", "value": "1"}]})
    )
    patched = core.patch_namespaced_pod(
        "sm", NS, {"spec": {"containers": [{"name": "main", "image": "python:3.12"}]}}
    )
    assert (patched.spec.containers[0].image, patched.spec.containers[0].env[0].name) == ("python:3.12", "A")
    with pytest.raises(client.ApiException) as immutable:
        core.patch_namespaced_pod(
            "sm", NS, {"spec": {"containers": [{"name": "main", "workingDir": "/tmp"}]}}
        )
    assert immutable.value.status == 422
    assert "pod updates may not change fields other than" in json.loads(immutable.value.body)["message"]


def test_selectors_pagination_and_expired_continue(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    for index in range(5):
        labels = {"trial": str(index), "exp": "e1" if index < 3 else "e2"}
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"c{index}", "labels": labels}})
    names = lambda items: [i.metadata.name for i in items]  # noqa: E731
    assert names(core.list_namespaced_config_map(NS, label_selector="exp=e1,trial!=1").items) == ["c0", "c2"]
    assert names(core.list_namespaced_config_map(NS, label_selector="trial in (3,4)").items) == ["c3", "c4"]
    assert names(core.list_namespaced_config_map(NS, label_selector="!trial").items) == []
    assert names(core.list_namespaced_config_map(NS, field_selector="metadata.name=c4").items) == ["c4"]
    page = core.list_namespaced_config_map(NS, limit=2)
    assert names(page.items) == ["c0", "c1"] and page.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map(NS, limit=10, _continue=page.metadata._continue)
    assert names(rest.items) == ["c2", "c3", "c4"]
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c5"}})
    cluster.compact()  # the page's version is now older than the oldest kept
    with pytest.raises(client.ApiException) as gone:
        core.list_namespaced_config_map(NS, limit=2, _continue=page.metadata._continue)
    assert (gone.value.status, json.loads(gone.value.body)["reason"]) == (410, "Expired")
    with pytest.raises(client.ApiException) as bad:
        core.list_namespaced_pod(NS, field_selector="spec.bogus=1")
    assert bad.value.status == 400


def test_crds_installable_per_test(tmp_path: Any) -> None:
    bare = start(tmp_path / "bare", operators=[])
    try:
        custom = client.CustomObjectsApi(config.new_client_from_config(str(bare.kubeconfig)))
        with pytest.raises(client.ApiException) as absent:
            custom.list_namespaced_custom_object(G, V, NS, "tfjobs")
        assert (absent.value.status, json.loads(absent.value.body)["message"]) == (
            404,
            "the server could not find the requested resource",
        )
        bare.install("kubeflow")
        extensions = client.ApiextensionsV1Api(config.new_client_from_config(str(bare.kubeconfig)))
        installed = {crd.metadata.name: crd for crd in extensions.list_custom_resource_definition().items}
        assert sorted(installed) == ["pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org"]
        assert {c.type: c.status for c in installed["tfjobs.kubeflow.org"].status.conditions}[
            "Established"
        ] == "True"
        custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("after"))
        bare.uninstall("kubeflow")
        wait_for(lambda: bare.registry.find(G, V, "tfjobs") is None, message="CRD removal")
        assert bare.store.list((G, "tfjobs")) == []
    finally:
        errors = bare.errors()
        bare.stop()
    assert errors == []


def test_discovery_and_version(cluster: KubernetesEmulator, api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().major == "1"
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"kubeflow.org", "frameworkcontroller.microsoft.com", "adaptdl.petuum.com", "apps"} <= groups
    resources = client.CustomObjectsApi(api).get_api_resources("adaptdl.petuum.com", "v1")
    by_name = {r.name: r for r in resources.resources}
    assert by_name["adaptdljobs"].short_names == ["adljob", "adljobs"] and "adaptdljobs/status" in by_name


def test_transient_errors_and_reads_lagging_after_create(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    cluster.faults.fail_next(2, code=500, method="GET")
    for _ in range(2):
        with pytest.raises(client.ApiException) as failed:
            core.list_namespaced_pod(NS)
        assert json.loads(failed.value.body)["reason"] == "InternalError"
    assert core.list_namespaced_pod(NS).items == []
    cluster.faults.fail_next(1, code=429, path="/configmaps")
    with pytest.raises(
        client.ApiException
    ) as throttled:  # a POST: urllib3 does not retry it after Retry-After
        core.create_namespaced_config_map(NS, {"metadata": {"name": "x"}})
    assert json.loads(throttled.value.body)["reason"] == "TooManyRequests"
    assert throttled.value.headers["Retry-After"] == "1"
    cluster.faults.lag_reads_after_create(1)
    core.create_namespaced_config_map(NS, {"metadata": {"name": "fresh"}})
    with pytest.raises(client.ApiException) as lagging:
        core.read_namespaced_config_map("fresh", NS)
    assert lagging.value.status == 404
    assert core.read_namespaced_config_map("fresh", NS).metadata.name == "fresh"


def test_namespaces_names_and_dry_run(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    with pytest.raises(client.ApiException) as no_namespace:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "x"}})
    assert json.loads(no_namespace.value.body)["message"] == 'namespaces "nowhere" not found'
    with pytest.raises(client.ApiException) as bad_name:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "Bad Name"}})
    causes = json.loads(bad_name.value.body)["details"]["causes"]
    assert causes[0]["field"] == "metadata.name" and causes[0]["reason"] == "FieldValueInvalid"
    generated = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "trial-"}})
    assert generated.metadata.name.startswith("trial-") and len(generated.metadata.name) == 11
    core.create_namespaced_config_map(NS, {"metadata": {"name": "dry"}}, dry_run="All")
    assert "dry" not in [c.metadata.name for c in core.list_namespaced_config_map(NS).items]
    core.create_namespace({"metadata": {"name": "exp"}})
    core.create_namespaced_secret("exp", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert core.read_namespaced_secret("s", "exp").data == {"k": "dg=="}
    version = core.list_namespace().metadata.resource_version
    core.delete_namespace("exp")
    phases = []
    for event in watch.Watch().stream(
        core.list_namespace, field_selector="metadata.name=exp", resource_version=version, timeout_seconds=10
    ):
        phases.append((event["type"], event["object"].status.phase))
        if event["type"] == "DELETED":
            break
    assert phases == [("MODIFIED", "Terminating"), ("DELETED", "Terminating")]
    assert core.list_namespaced_secret("exp").items == []


def test_yaml_bodies_are_accepted(cluster: KubernetesEmulator, api: client.ApiClient) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
    created = api.call_api(
        f"/api/v1/namespaces/{NS}/configmaps",
        "POST",
        body=manifest,
        auth_settings=["BearerToken"],
        header_params={"Content-Type": "application/yaml", "Accept": "application/json"},
        response_type="object",
        _return_http_data_only=True,
    )
    assert (created["metadata"]["name"], created["data"]) == ("from-yaml", {"k": "v"})


def test_deployments_are_accepted_and_recorded(cluster: KubernetesEmulator, api: client.ApiClient) -> None:
    """AdaptDL's TensorBoard in NNI: a Deployment, created and deleted (no controller runs it)."""
    apps = client.AppsV1Api(api)
    labels = {"app": "adaptdl-tensorboard-e1"}
    container = {"name": "tensorboard", "image": "tensorflow/tensorflow", "ports": [{"containerPort": 6006}]}
    body = {
        "metadata": {"name": "adaptdl-tensorboard-e1", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    created = apps.create_namespaced_deployment(NS, body)
    assert created.metadata.generation == 1
    assert [d.metadata.name for d in apps.list_namespaced_deployment(NS).items] == ["adaptdl-tensorboard-e1"]
    apps.delete_namespaced_deployment("adaptdl-tensorboard-e1", NS)
    assert apps.list_namespaced_deployment(NS).items == []


def test_hostnames_and_service_names_longer_than_a_dns_label_are_refused(core: client.CoreV1Api) -> None:
    """As the API server: ``ValidatePodSpec`` takes a pod's hostname and subdomain only as DNS-1123 labels
    (AdaptDL's ``<job>-<group>-<rank>``), ``ValidateServiceName`` a Service's name only as a DNS-1035 label
    (the training operator's ``<job>-<replicatype>-<index>``): at most 63 characters each."""
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(NS, pod_manifest("long-host", "true", hostname="h" * 64, subdomain="Sub"))
    body = json.loads(refused.value.body)
    assert (refused.value.status, body["reason"]) == (422, "Invalid")
    assert sorted(c["field"] for c in body["details"]["causes"]) == ["spec.hostname", "spec.subdomain"]
    assert "must be no more than 63 characters" in body["message"]
    core.create_namespaced_pod(NS, pod_manifest("host-63", "true", hostname="h" * 63))
    service = {"metadata": {"name": "s" * 64}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}
    with pytest.raises(client.ApiException) as service_refused:
        core.create_namespaced_service(NS, service)
    assert service_refused.value.status == 422
    assert "must be no more than 63 characters" in json.loads(service_refused.value.body)["message"]
