"""AdaptDLJobs through the emulated AdaptDL scheduler (webhook, allocator, controller), with the official client."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from tests.emulators.kubernetes import KubernetesEmulator, NodeConfig
from tests.emulators.kubernetes.k8s_testing import start, wait_for

G, V, NS, PLURAL = "adaptdl.petuum.com", "v1", "default", "adaptdljobs"
WEBHOOK = 'admission webhook "adaptdl-validator.adaptdl.svc.cluster.local" denied the request: '


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start(
        tmp_path / "cluster", operators=["adaptdl"], nodes=[NodeConfig("node-1"), NodeConfig("node-2")]
    )
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def job(name: str, command: str, *, preemptible: bool = False, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "trial:1", "command": ["bash", "-c", command]}
    container.update(spec.pop("container", {}))
    template = {"spec": {"containers": [container], **spec.pop("pod", {})}}
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "AdaptDLJob",
        "metadata": {"name": name, **spec.pop("metadata", {})},
        "spec": {"preemptible": preemptible, "template": template, **spec},
    }


def status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(G, V, NS, PLURAL, name).get("status") or {}


def phases_until(
    custom: client.CustomObjectsApi,
    name: str,
    final: tuple[str, ...],
    version: str | None = None,
    after: str | None = None,
) -> list[str]:
    """The phases a watch sees until one of ``final`` (once ``after`` was seen, when given)."""
    seen: list[str] = []
    watcher = watch.Watch()
    options = {"resource_version": version} if version else {}
    for event in watcher.stream(
        custom.list_namespaced_custom_object,
        G,
        V,
        NS,
        PLURAL,
        timeout_seconds=30,
        field_selector=f"metadata.name={name}",
        **options,
    ):
        phase = (event["object"].get("status") or {}).get("phase")
        if phase and (not seen or seen[-1] != phase):
            seen.append(phase)
        if phase in final and (after is None or after in seen):
            watcher.stop()
    return seen


def test_phases_pods_and_variables(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = f"env | grep ^ADAPTDL_ | sort; while [ ! -e {gate} ]; do sleep 0.05; done"
    created = custom.create_namespaced_custom_object(G, V, NS, PLURAL, job("adl1", script))
    uid = created["metadata"]["uid"]
    assert phases_until(custom, "adl1", ("Running",), created["metadata"]["resourceVersion"]) == [
        "Pending",
        "Starting",
        "Running",
    ]
    running = status(custom, "adl1")
    assert {k: running[k] for k in ("allocation", "replicas", "readyReplicas", "group")} == {
        "allocation": ["node-1"],
        "replicas": 1,
        "readyReplicas": 1,
        "group": 0,
    }
    pod = core.read_namespaced_pod(f"adl1-{uid}-0-0", NS)
    assert pod.metadata.labels == {"adaptdl": "true", "adaptdl/job": "adl1", "petuum.com/nodegroup": "all"}
    assert pod.metadata.annotations == {
        "adaptdl/replicas": "1",
        "adaptdl/group": "0",
        "adaptdl/rank": "0",
        "adaptdl/node": "node-1",
    }
    assert (pod.spec.hostname, pod.spec.restart_policy, pod.spec.node_selector) == (
        "adl1-0-0",
        "Never",
        {"kubernetes.io/hostname": "node-1"},
    )
    wait_for(lambda: "ADAPTDL_SCHED_VERSION" in core.read_namespaced_pod_log(pod.metadata.name, NS))
    variables = dict(
        line.split("=", 1) for line in core.read_namespaced_pod_log(pod.metadata.name, NS).splitlines()
    )
    assert variables == {
        "ADAPTDL_JOB_ID": "default/adl1",
        "ADAPTDL_MASTER_PORT": "47000",
        "ADAPTDL_NUM_NODES": "1",
        "ADAPTDL_NUM_REPLICAS": "1",
        "ADAPTDL_NUM_RESTARTS": "0",
        "ADAPTDL_REPLICA_RANK": "0",
        "ADAPTDL_SCHED_VERSION": "0.2.11",
        "ADAPTDL_SUPERVISOR_URL": f"{cluster.url}/_emu/adaptdl-supervisor",
    }
    with urllib.request.urlopen(f"{cluster.url}/_emu/adaptdl-supervisor/discover/{NS}/adl1/0") as answer:
        assert json.loads(answer.read()) == [pod.status.pod_ip]
    running_version = custom.get_namespaced_custom_object(G, V, NS, PLURAL, "adl1")["metadata"][
        "resourceVersion"
    ]
    gate.touch()
    assert [
        p for p in phases_until(custom, "adl1", ("Succeeded", "Failed"), running_version) if p != "Running"
    ] == ["Succeeded"]
    final = status(custom, "adl1")
    assert "allocation" not in final and "replicas" not in final and final["group"] == 0
    assert final["completionTimestamp"].endswith("+00:00") and "." in final["completionTimestamp"]
    wait_for(lambda: not core.list_namespaced_pod(NS, label_selector="adaptdl/job=adl1").items)


def test_failed_pod_fails_the_job_and_is_kept(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, job("adl2", "echo dying; exit 1"))
    assert phases_until(custom, "adl2", ("Succeeded", "Failed"))[-1] == "Failed"
    final = status(custom, "adl2")
    pods = core.list_namespaced_pod(NS, label_selector="adaptdl/job=adl2").items
    assert (final["reason"], final["message"]) == ("PodFailure", f"{pods[0].metadata.name} Failed")
    assert core.read_namespaced_pod_log(pods[0].metadata.name, NS) == "dying\n"


def test_reallocation_restarts_the_group_elsewhere(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, job("elastic", "sleep 60", preemptible=True))
    phases_until(custom, "elastic", ("Running",))
    version = custom.list_namespaced_custom_object(G, V, NS, PLURAL)["metadata"]["resourceVersion"]
    cluster.reallocate(NS, "elastic", ["node-2"])
    phases = phases_until(custom, "elastic", ("Running",), version, after="Stopping")
    assert phases == ["Running", "Stopping", "Pending", "Starting", "Running"]
    assert status(custom, "elastic")["group"] == 1
    pods = core.list_namespaced_pod(NS, label_selector="adaptdl/job=elastic").items
    assert [(p.metadata.annotations["adaptdl/group"], p.spec.node_name) for p in pods] == [("1", "node-2")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            job("noimage", "true", container={"image": ""}),
            WEBHOOK
            + 'PodTemplate "spec.template" is invalid: template.spec.containers[0].image: Required value',
        ),
        (
            job("minmax", "true", minReplicas=3, maxReplicas=2),
            WEBHOOK + "spec.maxReplicas must be greater than or equal to spec.minReplicas",
        ),
    ],
)
def test_webhook_rejections_are_422(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, body: dict[str, Any], message: str
) -> None:
    with pytest.raises(client.ApiException) as invalid:
        custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    answer = json.loads(invalid.value.body)
    assert (invalid.value.status, answer["reason"], answer["message"]) == (422, "Invalid", message)


def test_spec_updates_are_forbidden(cluster: KubernetesEmulator, custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, job("frozen", "sleep 60"))
    with pytest.raises(client.ApiException) as forbidden:
        custom.patch_namespaced_custom_object(G, V, NS, PLURAL, "frozen", {"spec": {"maxReplicas": 4}})
    answer = json.loads(forbidden.value.body)
    assert (forbidden.value.status, answer["reason"], answer["message"]) == (
        422,
        "Forbidden",
        WEBHOOK + "updates to job spec are forbidden",
    )
    labelled = custom.patch_namespaced_custom_object(
        G, V, NS, PLURAL, "frozen", {"metadata": {"labels": {"ok": "1"}}}
    )
    assert labelled["metadata"]["labels"] == {"ok": "1"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (job("x" * 64, "true"), "metadata.name: Too long: may not be more than 63 bytes"),
        (
            {"apiVersion": f"{G}/{V}", "kind": "AdaptDLJob", "metadata": {"name": "notemplate"}, "spec": {}},
            "spec.template: Required value",
        ),
        (
            job("badmin", "true", minReplicas=-1),
            "spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be "
            "greater than or equal to 0",
        ),
    ],
)
def test_crd_schema_rejections(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, body: dict[str, Any], message: str
) -> None:
    with pytest.raises(client.ApiException) as invalid:
        custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    assert json.loads(invalid.value.body)["message"].endswith(f"is invalid: {message}")


def test_nni_adl_trial_with_its_claim_and_configmap(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    """NNI's removed ``adl`` service: job, then a PVC and a ConfigMap owned by it; cancel deletes all three."""
    name = "nni-exp-e1-trial-t1"
    labels = {"app": "nni-kubernetes-trial", "expId": "e1", "trialId": "t1"}
    mounts = [
        {"name": "adaptdl-pvc", "mountPath": "/adaptdl/checkpoint", "subPath": "adaptdl/checkpoint"},
        {"name": "adaptdl-nni-configmap", "mountPath": "/run.sh", "subPath": "run.sh"},
    ]
    volumes = [
        {"name": "adaptdl-pvc", "persistentVolumeClaim": {"claimName": name}},
        {"name": "adaptdl-nni-configmap", "configMap": {"name": name, "defaultMode": 511}},
    ]
    env = [{"name": "ADAPTDL_CHECKPOINT_PATH", "value": "/adaptdl/checkpoint"}]
    body = job(
        name,
        "",
        metadata={"labels": labels},
        pod={"volumes": volumes},
        container={"command": ["/run.sh"], "env": env, "volumeMounts": mounts},
    )
    created = custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    owner = [
        {"apiVersion": f"{G}/{V}", "kind": "AdaptDLJob", "name": name, "uid": created["metadata"]["uid"]}
    ]
    core.create_namespaced_persistent_volume_claim(
        NS,
        {
            "metadata": {"name": name, "ownerReferences": owner},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    script = "#!/bin/bash\nexport NNI_PLATFORM=adl\necho $NNI_PLATFORM > $ADAPTDL_CHECKPOINT_PATH/platform\nsleep 60\n"
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": name, "ownerReferences": owner}, "data": {"run.sh": script}}
    )
    checkpoint = cluster.directory / "pvc" / NS / name / "adaptdl" / "checkpoint" / "platform"
    wait_for(
        lambda: checkpoint.exists() and checkpoint.read_text() == "adl\n",
        message="run.sh ran from the ConfigMap",
    )
    custom.delete_collection_namespaced_custom_object(
        G, V, NS, PLURAL, label_selector="app=nni-kubernetes-trial,expId=e1"
    )
    wait_for(
        lambda: (
            not core.list_namespaced_pod(NS).items
            and not core.list_namespaced_config_map(NS).items
            and not core.list_namespaced_persistent_volume_claim(NS).items
        ),
        message="owned objects collected",
    )


def test_allocator_honours_min_replicas_and_capacity(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    created = custom.create_namespaced_custom_object(
        G, V, NS, PLURAL, job("pair", "sleep 60", minReplicas=2, maxReplicas=4)
    )
    phases_until(custom, "pair", ("Running",), created["metadata"]["resourceVersion"])
    assert status(custom, "pair")["replicas"] == 2
    ranks = sorted(
        p.metadata.annotations["adaptdl/rank"]
        for p in core.list_namespaced_pod(NS, label_selector="adaptdl/job=pair").items
    )
    assert ranks == ["0", "1"]
    gpus = job("needsgpu", "true", container={"resources": {"limits": {"nvidia.com/gpu": 1}}})
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, gpus)
    wait_for(lambda: status(custom, "needsgpu").get("phase") == "Pending")
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, job("later", "sleep 60"))
    wait_for(lambda: status(custom, "later").get("allocation"), message="a later job allocated")
    assert "allocation" not in status(custom, "needsgpu")  # no node has a GPU: it waits, as with AdaptDL
