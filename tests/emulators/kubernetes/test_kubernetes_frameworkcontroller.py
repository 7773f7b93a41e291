"""Frameworks through the emulated FrameworkController, driven with the official client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import log_or_empty, wait_for

G, V, NS, PLURAL = "frameworkcontroller.microsoft.com", "v1", "default", "frameworks"


def framework(
    name: str,
    command: str,
    *,
    tasks: int = 1,
    retry: dict[str, Any] | None = None,
    task_retry: dict[str, Any] | None = None,
    policy: tuple[int, int] = (1, -1),
    execution: str = "Start",
    role: str = "worker",
) -> dict[str, Any]:
    """The shape of FrameworkController's basic examples and of NNI's trials."""
    container = {"name": "framework", "image": "ubuntu:trusty", "command": ["bash", "-c", command]}
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "Framework",
        "metadata": {"name": name},
        "spec": {
            "executionType": execution,
            "retryPolicy": retry or {"fancyRetryPolicy": False, "maxRetryCount": 0},
            "taskRoles": [
                {
                    "name": role,
                    "taskNumber": tasks,
                    "frameworkAttemptCompletionPolicy": {
                        "minFailedTaskCount": policy[0],
                        "minSucceededTaskCount": policy[1],
                    },
                    "task": {
                        "retryPolicy": task_retry or {"fancyRetryPolicy": False, "maxRetryCount": 0},
                        "podGracefulDeletionTimeoutSec": 600,
                        "pod": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                    },
                }
            ],
        },
    }


def get(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(G, V, NS, PLURAL, name)


def state(custom: client.CustomObjectsApi, name: str) -> str | None:
    return (get(custom, name).get("status") or {}).get("state")


def completion(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    wait_for(lambda: state(custom, name) == "Completed", message=f"{name} Completed")
    return get(custom, name)["status"]["attemptStatus"]["completionStatus"]


def first_task(status: dict[str, Any]) -> dict[str, Any]:
    return status["attemptStatus"]["taskRoleStatuses"][0]["taskStatuses"][0]


def json_patch(api: client.ApiClient, name: str, operations: list[dict[str, Any]]) -> Any:
    path = f"/apis/{G}/{V}/namespaces/{NS}/{PLURAL}/{name}"
    return api.call_api(
        path,
        "PATCH",
        header_params={"Content-Type": "application/json-patch+json"},
        body=operations,
        auth_settings=["BearerToken"],
        response_type="object",
        _return_http_data_only=True,
    )


def ordered(seen: list[str]) -> list[str]:
    return [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]


def test_every_state_is_visible_on_success(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    created = custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("exp1trial01", "sleep 0.3"))
    frameworks, tasks = [], []
    watcher = watch.Watch()  # from the creation on, so no write can be missed however late the watch starts
    for event in watcher.stream(
        custom.list_namespaced_custom_object,
        G,
        V,
        NS,
        PLURAL,
        timeout_seconds=30,
        resource_version=created["metadata"]["resourceVersion"],
    ):
        status = event["object"].get("status")
        if status is None:
            continue
        frameworks.append(status["state"])
        tasks.append(first_task(status)["state"])
        if status["state"] == "Completed":
            watcher.stop()
    # AttemptDeleting shows only while the garbage collector still holds the ConfigMap (a race, as upstream)
    assert [s for s in ordered(frameworks) if s != "AttemptDeleting"] == [
        "AttemptCreationPending",
        "AttemptCreationRequested",
        "AttemptPreparing",
        "AttemptRunning",
        "AttemptDeletionPending",
        "AttemptDeletionRequested",
        "AttemptCompleted",
        "Completed",
    ]
    assert ordered(tasks) == [
        "AttemptCreationPending",
        "AttemptCreationRequested",
        "AttemptPreparing",
        "AttemptRunning",
        "AttemptDeletionPending",
        "AttemptDeletionRequested",
        "AttemptCompleted",
        "Completed",
    ]
    status = get(custom, "exp1trial01")["status"]
    outcome = status["attemptStatus"]["completionStatus"]
    assert (outcome["code"], outcome["phrase"], outcome["type"]) == (
        0,
        "Succeeded",
        {"name": "Succeeded", "attributes": []},
    )
    assert outcome["trigger"] == {"message": outcome["diagnostics"], "taskRoleName": "worker", "taskIndex": 0}
    task = first_task(status)
    assert task["attemptStatus"]["completionStatus"]["pod"] == {
        "containers": [{"name": "framework", "reason": "Completed", "code": 0}]
    }
    assert status["startTime"] <= status["runTime"] <= status["completionTime"]


def test_pods_configmap_and_fc_variables(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = f"env | grep ^FC_ | sort; echo index={{{{FC_TASK_INDEX}}}}; while [ ! -e {gate} ]; do sleep 0.05; done"
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("fcvars", script, tasks=2))
    wait_for(lambda: state(custom, "fcvars") == "AttemptRunning")
    wait_for(lambda: "index=" in log_or_empty(core, "fcvars-worker-1"))
    status = get(custom, "fcvars")["status"]
    attempt = status["attemptStatus"]
    cm = core.read_namespaced_config_map("fcvars-attempt", NS)
    assert cm.metadata.finalizers == ["foregroundDeletion"] and cm.metadata.uid == attempt["configMapUID"]
    assert cm.metadata.owner_references[0].kind == "Framework"
    pod = core.read_namespaced_pod("fcvars-worker-1", NS)
    assert pod.metadata.owner_references[0].name == "fcvars-attempt"
    assert pod.metadata.labels == {
        "FC_FRAMEWORK_NAME": "fcvars",
        "FC_TASKROLE_NAME": "worker",
        "FC_TASK_INDEX": "1",
    }
    variables = dict(
        line.split("=", 1) for line in core.read_namespaced_pod_log("fcvars-worker-1", NS).splitlines()
    )
    task = status["attemptStatus"]["taskRoleStatuses"][0]["taskStatuses"][1]
    assert variables == {
        "FC_FRAMEWORK_NAMESPACE": NS,
        "FC_FRAMEWORK_NAME": "fcvars",
        "FC_TASKROLE_NAME": "worker",
        "FC_TASK_INDEX": "1",
        "FC_CONFIGMAP_NAME": "fcvars-attempt",
        "FC_POD_NAME": "fcvars-worker-1",
        "FC_FRAMEWORK_UID": get(custom, "fcvars")["metadata"]["uid"],
        "FC_FRAMEWORK_ATTEMPT_ID": "0",
        "FC_FRAMEWORK_ATTEMPT_INSTANCE_UID": f"0_{cm.metadata.uid}",
        "FC_CONFIGMAP_UID": cm.metadata.uid,
        "FC_TASKROLE_UID": status["attemptStatus"]["taskRoleStatuses"][0]["instanceUID"],
        "FC_TASK_UID": task["instanceUID"],
        "FC_TASK_ATTEMPT_ID": "0",
        "FC_POD_UID": pod.metadata.uid,
        "FC_TASK_ATTEMPT_INSTANCE_UID": f"0_{pod.metadata.uid}",
        "index": "1",
    }
    assert (
        task["attemptStatus"]["podUID"] == pod.metadata.uid
        and task["attemptStatus"]["podIP"] == pod.status.pod_ip
    )
    gate.touch()
    assert completion(custom, "fcvars")["code"] == 0
    wait_for(lambda: not core.list_namespaced_config_map(NS).items, message="attempt ConfigMap removed")


def test_stop_completes_as_failed_with_code_minus_210(
    cluster: KubernetesEmulator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("stopme", "sleep 60"))
    wait_for(lambda: state(custom, "stopme") == "AttemptRunning")
    patched = json_patch(api, "stopme", [{"op": "replace", "path": "/spec/executionType", "value": "Stop"}])
    seen = []
    watcher = watch.Watch()
    for event in watcher.stream(
        custom.list_namespaced_custom_object,
        G,
        V,
        NS,
        PLURAL,
        timeout_seconds=30,
        resource_version=patched["metadata"]["resourceVersion"],
    ):
        seen.append(event["object"]["status"]["state"])
        if seen[-1] == "Completed":
            watcher.stop()
    outcome = get(custom, "stopme")["status"]["attemptStatus"]["completionStatus"]
    assert (outcome["code"], outcome["phrase"], outcome["type"]) == (
        -210,
        "StopFrameworkRequested",
        {"name": "Failed", "attributes": ["Permanent"]},
    )
    assert outcome["diagnostics"] == "User has requested to stop the Framework"
    assert "AttemptDeleting" in seen  # the ConfigMap waits for its pods (foreground deletion)
    assert first_task(get(custom, "stopme")["status"])["attemptStatus"]["completionStatus"]["code"] == -220
    assert not core.list_namespaced_pod(NS).items and get(custom, "stopme")["metadata"]["name"] == "stopme"


def test_create_waits_until_started(
    cluster: KubernetesEmulator,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("later", "true", execution="Create"))
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("meanwhile", "true"))
    completion(custom, "meanwhile")  # the controller has synced many times meanwhile
    assert state(custom, "later") == "AttemptCreationPending"
    assert [c.metadata.name for c in core.list_namespaced_config_map(NS).items] == []
    custom.patch_namespaced_custom_object(G, V, NS, PLURAL, "later", {"spec": {"executionType": "Start"}})
    assert completion(custom, "later")["code"] == 0


def test_permanent_container_failure_is_not_retried(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    fancy = {"fancyRetryPolicy": True, "maxRetryCount": 1}
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        PLURAL,
        framework(
            "batchfailedpermanent",
            "echo exit with permanent failure; exit 210",
            retry=fancy,
            task_retry=fancy,
        ),
    )
    outcome = completion(custom, "batchfailedpermanent")
    assert (outcome["code"], outcome["phrase"], outcome["type"]) == (
        210,
        "ContainerPermanentFailed",
        {"name": "Failed", "attributes": ["Permanent"]},
    )
    assert (
        outcome["trigger"]["message"] == "FailedTaskCount 1 has reached MinFailedTaskCount 1 in the TaskRole"
    )
    assert (
        outcome["diagnostics"]
        == 'Pod failed: PodPattern matched: {"containers":[{"name":"framework","code":210}]}'
    )
    status = get(custom, "batchfailedpermanent")["status"]
    assert status["retryPolicyStatus"]["totalRetriedCount"] == 0 and status["attemptStatus"]["id"] == 0


def test_transient_failure_is_retried_by_the_fancy_policy(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    script = f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 200"
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        PLURAL,
        framework("batchfailedtransient", script, retry={"fancyRetryPolicy": True, "maxRetryCount": 0}),
    )
    assert completion(custom, "batchfailedtransient")["code"] == 0
    status = get(custom, "batchfailedtransient")["status"]
    assert status["retryPolicyStatus"] == {
        "totalRetriedCount": 1,
        "accountableRetriedCount": 0,
        "retryDelaySec": None,
    }
    assert (
        status["attemptStatus"]["id"] == 1
        and status["attemptStatus"]["configMapName"] == "batchfailedtransient-attempt"
    )


def test_task_level_retry_keeps_the_framework_attempt(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    script = f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 1"
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        PLURAL,
        framework("taskretry", script, task_retry={"fancyRetryPolicy": False, "maxRetryCount": 1}),
    )
    assert completion(custom, "taskretry")["code"] == 0
    status = get(custom, "taskretry")["status"]
    task = first_task(status)
    assert status["attemptStatus"]["id"] == 0 and status["retryPolicyStatus"]["totalRetriedCount"] == 0
    assert task["retryPolicyStatus"] == {
        "totalRetriedCount": 1,
        "accountableRetriedCount": 1,
        "retryDelaySec": None,
    }
    assert task["attemptStatus"]["id"] == 1 and task["attemptStatus"]["instanceUID"].startswith("1_")


def test_unrecognized_exit_code_and_normal_retries(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        PLURAL,
        framework(
            "batchfailedunknown",
            "echo giving up; exit 3",
            retry={"fancyRetryPolicy": False, "maxRetryCount": 1},
        ),
    )
    outcome = completion(custom, "batchfailedunknown")
    assert (outcome["code"], outcome["phrase"], outcome["type"]) == (
        3,
        "ContainerUnrecognizedFailed",
        {"name": "Failed", "attributes": []},
    )
    container = first_task(get(custom, "batchfailedunknown")["status"])["attemptStatus"]["completionStatus"][
        "pod"
    ]["containers"][0]
    assert container == {
        "name": "framework",
        "reason": "Error",
        "message": "giving up\n",
        "code": 3,
    }  # FallbackToLogsOnError
    assert get(custom, "batchfailedunknown")["status"]["retryPolicyStatus"]["accountableRetriedCount"] == 1


def test_min_succeeded_task_count_completes_early(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    script = "if [ {{FC_TASK_INDEX}} = 0 ]; then exit 0; fi; sleep 60"
    custom.create_namespaced_custom_object(
        G, V, NS, PLURAL, framework("early", script, tasks=2, policy=(1, 1))
    )
    outcome = completion(custom, "early")
    assert outcome["code"] == 0
    assert outcome["trigger"] == {
        "message": "SucceededTaskCount 1 has reached MinSucceededTaskCount 1 in the TaskRole",
        "taskRoleName": "worker",
        "taskIndex": 0,
    }
    other = get(custom, "early")["status"]["attemptStatus"]["taskRoleStatuses"][0]["taskStatuses"][1]
    assert other["attemptStatus"]["completionStatus"]["code"] == -220


def test_status_is_written_by_full_update_so_stale_puts_conflict(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    created = custom.create_namespaced_custom_object(G, V, NS, PLURAL, framework("whole", "sleep 60"))
    wait_for(lambda: state(custom, "whole") == "AttemptRunning")
    with pytest.raises(client.ApiException) as stale:
        custom.replace_namespaced_custom_object(G, V, NS, PLURAL, "whole", created)
    assert stale.value.status == 409
    with pytest.raises(client.ApiException) as no_subresource:
        custom.get_namespaced_custom_object_status(G, V, NS, PLURAL, "whole")
    assert no_subresource.value.status == 404


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"name": "exp-1"},
            "metadata.name: Invalid value: \"exp-1\": metadata.name in body should match '^[a-z0-9]{1,63}$'",
        ),
        (
            {"executionType": "Run"},
            'spec.executionType: Unsupported value: "Run": supported values: "Create", "Start", "Stop"',
        ),
        (
            {"maxRetryCount": -3},
            "spec.retryPolicy.maxRetryCount: Invalid value: -3: spec.retryPolicy.maxRetryCount in body "
            "should be greater than or equal to -2",
        ),
        (
            {"taskNumber": 10001},
            "spec.taskRoles[0].taskNumber: Invalid value: 10001: spec.taskRoles[0].taskNumber in body "
            "should be less than or equal to 10000",
        ),
        (
            {"role": "Worker"},
            'spec.taskRoles[0].name: Invalid value: "Worker": spec.taskRoles[0].name in body should match '
            "'^[a-z0-9]{1,63}$'",
        ),
    ],
)
def test_crd_schema_rejections(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, change: dict[str, Any], message: str
) -> None:
    body = framework(
        change.get("name", "valid"),
        "true",
        execution=change.get("executionType", "Start"),
        role=change.get("role", "worker"),
    )
    if "maxRetryCount" in change:
        body["spec"]["retryPolicy"]["maxRetryCount"] = change["maxRetryCount"]
    if "taskNumber" in change:
        body["spec"]["taskRoles"][0]["taskNumber"] = change["taskNumber"]
    with pytest.raises(client.ApiException) as invalid:
        custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    status = json.loads(invalid.value.body)
    assert (invalid.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == f'Framework.{G} "{body["metadata"]["name"]}" is invalid: {message}'


def test_unknown_fields_are_pruned(cluster: KubernetesEmulator, custom: client.CustomObjectsApi) -> None:
    body = framework("pruned", "true", execution="Create")
    body["spec"]["bogus"] = 1
    body["spec"]["taskRoles"][0]["task"]["pod"]["spec"]["kept"] = True  # the pod keeps unknown fields
    created = custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    assert (
        "bogus" not in created["spec"]
        and created["spec"]["taskRoles"][0]["task"]["pod"]["spec"]["kept"] is True
    )


def test_controller_restart_resumes_from_the_status(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    custom.create_namespaced_custom_object(
        G, V, NS, PLURAL, framework("resumed", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    )
    wait_for(lambda: state(custom, "resumed") == "AttemptRunning")
    cluster.restart_controller("frameworkcontroller")
    gate.touch()
    assert completion(custom, "resumed")["code"] == 0


def test_nni_trial_with_the_frameworkbarrier_init_container(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api, tmp_path: Path
) -> None:
    """NNI's FrameworkController trial: the barrier image (no command) writes injector.sh for the run script."""
    body = framework("nniexpe1trialt1", "", tasks=2, policy=(1, -1))
    pod = body["spec"]["taskRoles"][0]["task"]["pod"]
    barrier = {"name": "frameworkbarrier-volume", "mountPath": "/mnt/frameworkbarrier"}
    pod["spec"].update(
        {
            "restartPolicy": "OnFailure",
            "volumes": [{"name": "frameworkbarrier-volume", "emptyDir": {}}],
            "initContainers": [
                {
                    "name": "frameworkbarrier",
                    "image": "frameworkcontroller/frameworkbarrier",
                    "volumeMounts": [barrier],
                }
            ],
        }
    )
    pod["spec"]["containers"][0].update(
        {
            "command": [
                "sh",
                "-c",
                "FB_WORKER_PORT=4000 . /mnt/frameworkbarrier/injector.sh >/dev/null && "
                f"echo $FB_WORKER_IPS $FB_WORKER_ADDRESSES > {tmp_path}/seen-$FC_TASK_INDEX",
            ],
            "volumeMounts": [barrier],
        }
    )
    custom.create_namespaced_custom_object(G, V, NS, PLURAL, body)
    assert completion(custom, "nniexpe1trialt1")["code"] == 0
    tasks = get(custom, "nniexpe1trialt1")["status"]["attemptStatus"]["taskRoleStatuses"][0]["taskStatuses"]
    ips = [t["attemptStatus"]["podIP"] for t in tasks]
    expected = f"{','.join(ips)} {','.join(ip + ':4000' for ip in ips)}\n"
    assert [(tmp_path / f"seen-{i}").read_text() for i in range(2)] == [expected, expected]
    containers = [
        (c["name"], c["code"])
        for t in tasks
        for c in t["attemptStatus"]["completionStatus"]["pod"]["containers"]
    ]
    assert containers == [("frameworkbarrier", 0), ("framework", 0)] * 2
