"""Deletion semantics: owner references and garbage collection, foreground/orphan propagation, finalizers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, watch

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import pod_manifest, wait_for

NS = "default"


def owned_by(owner: Any, name: str, block: bool = True) -> dict[str, Any]:
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": block,
    }
    return {"metadata": {"name": name, "ownerReferences": [reference]}}


def names(core: client.CoreV1Api) -> set[str]:
    return {c.metadata.name for c in core.list_namespaced_config_map(NS).items} | {
        p.metadata.name for p in core.list_namespaced_pod(NS).items
    }


def test_background_deletion_collects_dependents(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map(NS, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(NS, owned_by(owner, "child"))
    grandchild_owner = core.read_namespaced_config_map("child", NS)
    core.create_namespaced_config_map(NS, owned_by(grandchild_owner, "grandchild"))
    status = core.delete_namespaced_config_map("owner", NS, propagation_policy="Background")
    assert status.status == "Success" and status.details.uid == owner.metadata.uid
    wait_for(lambda: not names(core), message="cascade")


def test_foreground_deletion_waits_for_blocking_dependents(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    owner = core.create_namespaced_config_map(NS, {"metadata": {"name": "job"}})
    pod = pod_manifest("worker", "trap 'exit 0' TERM; while true; do sleep 0.05; done")
    pod["metadata"].update(owned_by(owner, "worker")["metadata"])
    core.create_namespaced_pod(NS, pod)
    wait_for(lambda: core.read_namespaced_pod("worker", NS).status.phase == "Running")
    version = core.list_namespaced_config_map(NS).metadata.resource_version
    client.CoreV1Api(core.api_client).delete_namespaced_config_map("job", NS, propagation_policy="Foreground")
    events = []
    for event in watch.Watch().stream(
        core.list_namespaced_config_map, NS, resource_version=version, timeout_seconds=20
    ):
        events.append(
            (
                event["type"],
                event["object"].metadata.finalizers,
                bool(event["object"].metadata.deletion_timestamp),
            )
        )
        if event["type"] == "DELETED":
            break
    assert events[0] == ("MODIFIED", ["foregroundDeletion"], True)
    assert events[-1][0] == "DELETED"
    assert "worker" not in names(core)  # the owner went only after its pod


def test_orphan_keeps_dependents_without_the_reference(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    owner = core.create_namespaced_config_map(NS, {"metadata": {"name": "parent"}})
    core.create_namespaced_config_map(NS, owned_by(owner, "kept"))
    core.delete_namespaced_config_map("parent", NS, propagation_policy="Orphan")
    wait_for(lambda: "parent" not in names(core), message="owner gone")
    assert core.read_namespaced_config_map("kept", NS).metadata.owner_references is None


def test_finalizers_hold_an_object_until_removed(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    body = {
        "apiVersion": "frameworkcontroller.microsoft.com/v1",
        "kind": "Framework",
        "metadata": {"name": "held", "finalizers": ["example.com/keep"]},
        "spec": {"executionType": "Create"},
    }
    custom.create_namespaced_custom_object("frameworkcontroller.microsoft.com", "v1", NS, "frameworks", body)
    answer = custom.delete_namespaced_custom_object(
        "frameworkcontroller.microsoft.com", "v1", NS, "frameworks", "held"
    )
    assert answer["kind"] == "Framework" and answer["metadata"]["deletionTimestamp"]
    still = custom.get_namespaced_custom_object(
        "frameworkcontroller.microsoft.com", "v1", NS, "frameworks", "held"
    )
    assert still["metadata"]["finalizers"] == ["example.com/keep"]
    custom.patch_namespaced_custom_object(
        "frameworkcontroller.microsoft.com",
        "v1",
        NS,
        "frameworks",
        "held",
        {"metadata": {"finalizers": None}},
    )
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(
            "frameworkcontroller.microsoft.com", "v1", NS, "frameworks", "held"
        )
    assert gone.value.status == 404


def test_delete_preconditions(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "guarded"}})
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-the-uid"))
    with pytest.raises(client.ApiException) as refused:
        core.delete_namespaced_config_map("guarded", NS, body=options)
    body = json.loads(refused.value.body)
    assert (refused.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"].startswith(
        'Operation cannot be fulfilled on configmaps "guarded": Precondition failed: UID in precondition: not-the-uid'
    )
