"""TFJob and PyTorchJob through the emulated training operator, driven with the official client and the SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch

from tests.emulators.kubernetes import KubernetesEmulator, ManualClock
from tests.emulators.kubernetes.k8s_testing import start, wait_for

G, V, NS = "kubeflow.org", "v1", "default"
WEBHOOK_TF = 'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied the request: '
WEBHOOK_PT = 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '


def replica(
    command: str,
    container: str = "tensorflow",
    replicas: int | None = 1,
    restart: str | None = "Never",
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"creationTimestamp": None},
            "spec": {
                "containers": [
                    {"name": container, "image": "trial:1", "command": ["bash", "-c", command], **extra}
                ]
            },
        }
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def tfjob(
    name: str, replicas: dict[str, Any], run_policy: dict[str, Any] | None = None, **labels: str
) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "TFJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "runPolicy": run_policy if run_policy is not None else {"cleanPodPolicy": "None"},
            "tfReplicaSpecs": replicas,
        },
    }


def pytorchjob(
    name: str, replicas: dict[str, Any], run_policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"runPolicy": run_policy or {}, "pytorchReplicaSpecs": replicas},
    }


def conditions(custom: client.CustomObjectsApi, plural: str, name: str) -> list[tuple[str, str]]:
    job = custom.get_namespaced_custom_object(G, V, NS, plural, name)
    return [(c["type"], c["status"]) for c in (job.get("status") or {}).get("conditions") or []]


def last_condition(custom: client.CustomObjectsApi, plural: str, name: str) -> str | None:
    found = conditions(custom, plural, name)
    return found[-1][0] if found else None


def finished(custom: client.CustomObjectsApi, plural: str, name: str) -> str | None:
    return next(
        (
            kind
            for kind, status in conditions(custom, plural, name)
            if kind in ("Succeeded", "Failed") and status == "True"
        ),
        None,
    )


def last_conditions(custom: client.CustomObjectsApi, plural: str, created: dict[str, Any]) -> list[str]:
    """The successive last conditions of a job, watched from its creation until it finishes."""
    lasts: list[str] = []
    watcher = watch.Watch()
    for event in watcher.stream(
        custom.list_namespaced_custom_object,
        G,
        V,
        NS,
        plural,
        timeout_seconds=20,
        resource_version=created["metadata"]["resourceVersion"],
        field_selector=f"metadata.name={created['metadata']['name']}",
    ):
        found = (event["object"].get("status") or {}).get("conditions") or []
        if found and (not lasts or lasts[-1] != found[-1]["type"]):
            lasts.append(found[-1]["type"])
        if lasts[-1:] in (["Succeeded"], ["Failed"]):
            watcher.stop()
    return lasts


def test_nni_style_tfjob_walks_its_conditions(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    worker = replica("", restart=None)
    pod_spec = worker["template"]["spec"]
    pod_spec["restartPolicy"] = "ExitCode"  # NNI put it at pod level; the operator overwrites it
    pod_spec["containers"][0]["args"] = [
        "bash",
        "-c",
        "echo training; sleep 0.3",
    ]  # NNI sent args, not command
    del pod_spec["containers"][0]["command"]
    job = tfjob(
        "nni-exp-e1-trial-t1", {"Worker": worker}, app="nni-kubernetes-trial", expId="e1", trialId="t1"
    )
    created = custom.create_namespaced_custom_object(G, V, NS, "tfjobs", job)
    lasts = last_conditions(custom, "tfjobs", created)
    assert lasts == ["Created", "Running", "Succeeded"]
    final = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", job["metadata"]["name"])
    assert [(c["type"], c["status"], c["reason"]) for c in final["status"]["conditions"]] == [
        ("Created", "True", "TFJobCreated"),
        ("Running", "False", "TFJobRunning"),
        ("Succeeded", "True", "TFJobSucceeded"),
    ]
    assert (
        final["status"]["conditions"][-1]["message"]
        == "TFJob default/nni-exp-e1-trial-t1 successfully completed."
    )
    assert final["status"]["replicaStatuses"] == {"Worker": {"succeeded": 1}}
    assert final["status"]["startTime"] <= final["status"]["completionTime"]
    pod = core.read_namespaced_pod("nni-exp-e1-trial-t1-worker-0", NS)
    assert pod.metadata.labels == {
        "training.kubeflow.org/job-name": "nni-exp-e1-trial-t1",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/operator-name": "tfjob-controller",
        "training.kubeflow.org/job-role": "master",
    }
    owner = pod.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
        "TFJob",
        job["metadata"]["name"],
        True,
        True,
    )
    assert (
        pod.spec.containers[0].ports[0].name == "tfjob-port"
        and pod.spec.containers[0].ports[0].container_port == 2222
    )
    assert core.read_namespaced_pod_log(pod.metadata.name, NS, container="tensorflow") == "training\n"
    assert core.read_namespaced_service(pod.metadata.name, NS).spec.cluster_ip == "None"
    assert pod.spec.restart_policy == "Never"  # TF's default replica policy, not the template's
    warnings = core.list_namespaced_event(NS, field_selector="involvedObject.name=nni-exp-e1-trial-t1").items
    assert [e.reason for e in warnings] == ["SetPodTemplateRestartPolicy"]


def test_failing_worker_fails_the_job_with_its_exit_code_on_the_pod(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("broken", {"Worker": replica("exit 7")}))
    assert wait_for(lambda: finished(custom, "tfjobs", "broken")) == "Failed"
    status = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "broken")["status"]
    assert (
        status["conditions"][-1]["message"]
        == "TFJob default/broken has failed because 1 Worker replica(s) failed."
    )
    pods = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=broken").items
    assert pods[0].status.container_statuses[0].state.terminated.exit_code == 7


def test_backoff_limit_zero_fails_on_the_first_failure_and_deletes_the_pods(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    """``backoffLimit: 0`` with ``Never``: the backoff check fires before the replica rule, and the pods go."""
    job = tfjob("strict", {"Worker": replica("exit 7")}, {"cleanPodPolicy": "None", "backoffLimit": 0})
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", job)
    assert wait_for(lambda: finished(custom, "tfjobs", "strict")) == "Failed"
    status = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "strict")["status"]
    assert (
        status["conditions"][-1]["message"]
        == "Job strict has failed because it has reached the specified backoff limit"
    )
    wait_for(
        lambda: not core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=strict").items
    )


def test_exit_code_policy_restarts_retryable_failures(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    marker = tmp_path / "once"
    script = f"sleep 0.2; if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 130"
    created = custom.create_namespaced_custom_object(
        G, V, NS, "tfjobs", tfjob("retry", {"Worker": replica(script, restart="ExitCode")})
    )
    lasts = last_conditions(custom, "tfjobs", created)
    assert lasts == ["Created", "Running", "Restarting", "Running", "Succeeded"]
    final = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "retry")["status"]["conditions"]
    assert [c["type"] for c in final] == ["Created", "Running", "Succeeded"]


def test_exit_code_policy_fails_on_a_permanent_code(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        G, V, NS, "tfjobs", tfjob("permanent", {"Worker": replica("exit 1", restart="ExitCode")})
    )
    assert wait_for(lambda: finished(custom, "tfjobs", "permanent")) == "Failed"
    message = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "permanent")["status"]["conditions"][
        -1
    ]["message"]
    assert message == 'job "permanent" is failing because "Worker" replica(s) failed.'


def test_pytorch_default_on_failure_restarts_forever(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    """NNI left the replica policy unset: PyTorch's default OnFailure restarts a failing trial in place."""
    job = pytorchjob("loop", {"Master": replica("exit 1", container="pytorch", restart=None)})
    custom.create_namespaced_custom_object(G, V, NS, "pytorchjobs", job)

    def restarts() -> int:
        pods = core.list_namespaced_pod(NS, field_selector="metadata.name=loop-master-0").items
        statuses = pods[0].status.container_statuses if pods else None
        return statuses[0].restart_count if statuses else 0

    wait_for(lambda: restarts() >= 3, message="three restarts")
    assert core.read_namespaced_pod("loop-master-0", NS).spec.restart_policy == "OnFailure"
    assert finished(custom, "pytorchjobs", "loop") is None
    assert last_condition(custom, "pytorchjobs", "loop") == "Running"


def test_backoff_limit_fails_a_restarting_job(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    job = pytorchjob(
        "limited",
        {"Master": replica("exit 1", container="pytorch", restart="OnFailure")},
        {"backoffLimit": 2, "cleanPodPolicy": "None"},
    )
    custom.create_namespaced_custom_object(G, V, NS, "pytorchjobs", job)
    assert wait_for(lambda: finished(custom, "pytorchjobs", "limited")) == "Failed"
    message = custom.get_namespaced_custom_object(G, V, NS, "pytorchjobs", "limited")["status"]["conditions"][
        -1
    ]["message"]
    assert message == "Job limited has failed because it has reached the specified backoff limit"
    wait_for(
        lambda: (
            not core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=limited").items
        )
    )


def test_pytorch_master_and_workers_get_their_rendezvous(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    show = (
        "echo $MASTER_ADDR $MASTER_PORT $RANK $WORLD_SIZE $PET_NNODES $PET_NPROC_PER_NODE $PYTHONUNBUFFERED"
    )
    job = pytorchjob(
        "ddp",
        {
            "Master": replica(show, container="pytorch"),
            "Worker": replica(show, container="pytorch", replicas=2),
        },
        {"cleanPodPolicy": "None"},
    )
    custom.create_namespaced_custom_object(G, V, NS, "pytorchjobs", job)
    assert wait_for(lambda: finished(custom, "pytorchjobs", "ddp")) == "Succeeded"
    logs = {
        name: core.read_namespaced_pod_log(name, NS)
        for name in ("ddp-master-0", "ddp-worker-0", "ddp-worker-1")
    }
    assert logs == {
        "ddp-master-0": "ddp-master-0 23456 0 3 3 auto 1\n",
        "ddp-worker-0": "ddp-master-0 23456 1 3 3 auto 1\n",
        "ddp-worker-1": "ddp-master-0 23456 2 3 3 auto 1\n",
    }
    status = custom.get_namespaced_custom_object(G, V, NS, "pytorchjobs", "ddp")["status"]
    assert status["conditions"][-1]["message"] == "PyTorchJob ddp is successfully completed."
    assert status["replicaStatuses"]["Master"]["selector"] == (
        "training.kubeflow.org/job-name=ddp,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=master"
    )


def test_distributed_tfjob_gets_tf_config(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    job = tfjob("dist", {"worker": replica('echo "$TF_CONFIG"', replicas=2), "PS": replica("echo ps")})
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", job)
    assert wait_for(lambda: finished(custom, "tfjobs", "dist")) == "Succeeded"
    # the typed call would turn a JSON log into a Python repr: read the raw body
    raw = core.read_namespaced_pod_log("dist-worker-1", NS, _preload_content=False).data
    config_of_worker_1 = json.loads(raw)
    assert config_of_worker_1 == {
        "cluster": {
            "ps": ["dist-ps-0.default.svc:2222"],
            "worker": ["dist-worker-0.default.svc:2222", "dist-worker-1.default.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    stored = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "dist")
    assert list(stored["spec"]["tfReplicaSpecs"]) == [
        "worker",
        "PS",
    ]  # defaults stay in the operator's memory


@pytest.mark.parametrize(
    ("plural", "job", "message"),
    [
        (
            "tfjobs",
            tfjob("1st", {"Worker": replica("true")}),
            WEBHOOK_TF
            + 'metadata.name: Invalid value: "1st": should match: a DNS-1035 label must consist of lower case '
            "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
            "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            "tfjobs",
            tfjob("two-leaders", {"Chief": replica("true"), "Master": replica("true")}),
            WEBHOOK_TF + "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role",
        ),
        (
            "pytorchjobs",
            pytorchjob("misnamed", {"Worker": replica("true", container="main", replicas=0)}),
            WEBHOOK_PT
            + "[spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one "
            "container with name pytorch, spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1]",
        ),
        (
            "pytorchjobs",
            pytorchjob("lonely", {"Master": replica("true", container="pytorch", replicas=None)}),
            WEBHOOK_PT + "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
        ),
        (
            "pytorchjobs",
            pytorchjob("chief", {"Chief": replica("true", container="pytorch")}),
            WEBHOOK_PT
            + 'spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"',
        ),
    ],
)
def test_webhook_rejections_are_403_with_the_operator_text(
    cluster: KubernetesEmulator,
    custom: client.CustomObjectsApi,
    plural: str,
    job: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(client.ApiException) as denied:
        custom.create_namespaced_custom_object(G, V, NS, plural, job)
    body = json.loads(denied.value.body)
    assert (denied.value.status, body["reason"], body["message"]) == (403, "Forbidden", message)


def test_schema_rejects_a_missing_replica_map(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi
) -> None:
    job = tfjob("empty", {})
    del job["spec"]["tfReplicaSpecs"]
    with pytest.raises(client.ApiException) as invalid:
        custom.create_namespaced_custom_object(G, V, NS, "tfjobs", job)
    assert (
        json.loads(invalid.value.body)["message"]
        == 'TFJob.kubeflow.org "empty" is invalid: spec.tfReplicaSpecs: Required value'
    )


def test_suspend_and_resume(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(
        G, V, NS, "tfjobs", tfjob("pausable", {"Worker": replica("sleep 60")})
    )
    wait_for(lambda: last_condition(custom, "tfjobs", "pausable") == "Running")
    custom.patch_namespaced_custom_object(
        G, V, NS, "tfjobs", "pausable", {"spec": {"runPolicy": {"suspend": True}}}
    )
    wait_for(lambda: last_condition(custom, "tfjobs", "pausable") == "Suspended")
    assert conditions(custom, "tfjobs", "pausable") == [
        ("Created", "True"),
        ("Running", "False"),
        ("Suspended", "True"),
    ]
    wait_for(
        lambda: (
            not core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=pausable").items
        )
    )
    custom.patch_namespaced_custom_object(
        G, V, NS, "tfjobs", "pausable", {"spec": {"runPolicy": {"suspend": False}}}
    )
    wait_for(lambda: last_condition(custom, "tfjobs", "pausable") == "Running")
    assert ("Suspended", "False") in conditions(custom, "tfjobs", "pausable")


def test_cancel_by_label_selector_removes_jobs_and_pods(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    labels = {"app": "nni-kubernetes-trial", "expId": "e2", "trialId": "t9"}
    custom.create_namespaced_custom_object(
        G, V, NS, "tfjobs", tfjob("cancelled", {"Worker": replica("sleep 60")}, **labels)
    )
    wait_for(lambda: last_condition(custom, "tfjobs", "cancelled") == "Running")
    gone = custom.delete_collection_namespaced_custom_object(
        G,
        V,
        NS,
        "tfjobs",
        label_selector="app=nni-kubernetes-trial,expId=e2,trialId=t9",
        propagation_policy="Background",
    )
    assert [item["metadata"]["name"] for item in gone["items"]] == ["cancelled"]
    wait_for(lambda: not core.list_namespaced_pod(NS).items, message="pods garbage-collected")
    assert core.list_namespaced_service(NS).items == []


def test_controller_restart_rebuilds_status_from_pods(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    custom.create_namespaced_custom_object(
        G,
        V,
        NS,
        "tfjobs",
        tfjob("survivor", {"Worker": replica(f"while [ ! -e {gate} ]; do sleep 0.05; done")}),
    )
    wait_for(lambda: last_condition(custom, "tfjobs", "survivor") == "Running")
    cluster.restart_controller("training-operator")
    gate.touch()
    assert wait_for(lambda: finished(custom, "tfjobs", "survivor")) == "Succeeded"
    assert conditions(custom, "tfjobs", "survivor") == [
        ("Created", "True"),
        ("Running", "False"),
        ("Succeeded", "True"),
    ]


def test_jobs_managed_elsewhere_are_left_alone(
    cluster: KubernetesEmulator, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    job = tfjob("elsewhere", {"Worker": replica("true")}, {"managedBy": "kueue.x-k8s.io/multikueue"})
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", job)
    custom.create_namespaced_custom_object(G, V, NS, "tfjobs", tfjob("here", {"Worker": replica("true")}))
    wait_for(lambda: finished(custom, "tfjobs", "here"))
    assert "status" not in custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "elsewhere")
    assert not core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=elsewhere").items


@pytest.fixture
def manual(tmp_path: Path) -> Iterator[KubernetesEmulator]:
    emulator = start(tmp_path / "manual", clock=ManualClock(), operators=["kubeflow"])
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def test_active_deadline_and_ttl_on_a_manual_clock(manual: KubernetesEmulator) -> None:
    custom = client.CustomObjectsApi(config.new_client_from_config(str(manual.kubeconfig)))
    policy = {"activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 3600, "cleanPodPolicy": "Running"}
    custom.create_namespaced_custom_object(
        G, V, NS, "tfjobs", tfjob("slow", {"Worker": replica("sleep 60")}, policy)
    )
    wait_for(lambda: manual.advance(0.05) and last_condition(custom, "tfjobs", "slow") == "Running")
    manual.advance(600)
    wait_for(lambda: manual.advance(0.05) and finished(custom, "tfjobs", "slow") == "Failed")
    status = custom.get_namespaced_custom_object(G, V, NS, "tfjobs", "slow")["status"]
    assert (
        status["conditions"][-1]["message"]
        == "Job slow has failed because it was active longer than specified deadline"
    )
    manual.advance(3600)

    def deleted() -> bool:
        manual.advance(0.05)
        return not custom.list_namespaced_custom_object(G, V, NS, "tfjobs")["items"]

    wait_for(deleted, message="TTL deletion")


def test_kubeflow_training_sdk_interop(cluster: KubernetesEmulator) -> None:
    training = pytest.importorskip("kubeflow.training")
    from kubeflow.training import models

    sdk = training.TrainingClient(config_file=str(cluster.kubeconfig), namespace=NS, job_kind="TFJob")
    container = client.V1Container(name="tensorflow", image="tf:2", command=["bash", "-c", "echo from sdk"])
    job = models.KubeflowOrgV1TFJob(
        api_version=f"{G}/{V}",
        kind="TFJob",
        metadata=client.V1ObjectMeta(name="sdk-job"),
        spec=models.KubeflowOrgV1TFJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            tf_replica_specs={
                "Worker": models.KubeflowOrgV1ReplicaSpec(
                    replicas=1,
                    restart_policy="Never",
                    template=client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[container])),
                )
            },
        ),
    )
    sdk.create_job(job)
    wait_for(lambda: sdk.is_job_succeeded("sdk-job"), message="SDK sees Succeeded")
    done = sdk.wait_for_job_conditions("sdk-job", timeout=20, polling_interval=1)
    assert isinstance(done, models.KubeflowOrgV1TFJob) and sdk.is_job_succeeded("sdk-job")
    assert [c.type for c in sdk.get_job_conditions("sdk-job")] == ["Created", "Running", "Succeeded"]
    logs, _ = sdk.get_job_logs("sdk-job")
    assert logs == {"sdk-job-worker-0": "from sdk\n"}
    sdk.delete_job("sdk-job")
