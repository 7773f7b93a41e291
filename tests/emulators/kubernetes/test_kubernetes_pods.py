"""Pods through the emulated scheduler and kubelet: states, real processes, environment, volumes, logs, faults."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch

from tests.emulators.kubernetes import KubernetesEmulator, ManualClock, NodeConfig
from tests.emulators.kubernetes.k8s_testing import phase_of, pod_manifest, start, wait_for

NS = "default"


@pytest.fixture
def storage(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("export", "share")}
    for path in paths.values():
        path.mkdir()
    return paths


@pytest.fixture
def cluster(tmp_path: Path, storage: dict[str, Path]) -> Iterator[KubernetesEmulator]:
    emulator = start(
        tmp_path / "cluster",
        operators=[],
        nfs_exports={"nfs.example:/exports/nni": storage["export"]},
        azure_shares={"trials": storage["share"]},
        nodes=[NodeConfig("node-1", cpu="4", memory="8Gi", gpus=1)],
    )
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


def states(pod: client.V1Pod) -> list[str]:
    found = []
    for status in pod.status.container_statuses or []:
        state = status.state
        if state.waiting:
            found.append(state.waiting.reason)
        elif state.running:
            found.append("Running")
        elif state.terminated:
            found.append(f"{state.terminated.reason}:{state.terminated.exit_code}")
    return found


def watch_pod(
    core: client.CoreV1Api, created: client.V1Pod, until: tuple[str, ...] = ("Succeeded", "Failed")
) -> list[client.V1Pod]:
    """The pod as created, then every version of it until a final phase."""
    seen = [created]
    watcher = watch.Watch()
    for event in watcher.stream(
        core.list_namespaced_pod,
        NS,
        field_selector=f"metadata.name={created.metadata.name}",
        resource_version=created.metadata.resource_version,
        timeout_seconds=20,
    ):
        seen.append(event["object"])
        if event["object"].status.phase in until:
            watcher.stop()
    return seen


def test_every_state_of_a_pod_is_visible(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    history = watch_pod(core, core.create_namespaced_pod(NS, pod_manifest("steps", "sleep 0.2; exit 3")))
    summary = [(p.status.phase, bool(p.spec.node_name), tuple(states(p))) for p in history]
    assert summary[0] == ("Pending", False, ())
    assert ("Pending", True, ("ContainerCreating",)) in summary
    assert ("Running", True, ("Running",)) in summary
    assert summary[-1] == ("Failed", True, ("Error:3",))
    final = history[-1]
    terminated = final.status.container_statuses[0].state.terminated
    assert terminated.started_at <= terminated.finished_at and final.status.pod_ip.startswith("127.0.")
    conditions = {c.type: c.status for c in final.status.conditions}
    assert conditions == {
        "PodScheduled": "True",
        "Initialized": "True",
        "Ready": "False",
        "ContainersReady": "False",
    }
    assert final.spec.restart_policy == "Never" and final.spec.service_account_name == "default"
    assert final.status.qos_class == "BestEffort"


def test_environment_of_the_container(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": "settings"}, "data": {"lr": "0.1", "opt": "adam"}}
    )
    core.create_namespaced_secret(
        NS, {"metadata": {"name": "creds"}, "data": {"key": base64.b64encode(b"s3cr3t").decode()}}
    )
    env = [
        {"name": "PLAIN", "value": "v"},
        {"name": "DERIVED", "value": "$(PLAIN)-x"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "TRIAL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['trial']"}}},
        {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "lr"}}},
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "key"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
    ]
    script = "env | sort | grep -E '^(PLAIN|DERIVED|POD|UID|TRIAL|LR|KEY|CPU|CFG_opt|HOSTNAME|KUBERNETES_SERVICE_HOST|HOME)='; echo $0 $1"
    manifest = pod_manifest(
        "env",
        script,
        metadata={"labels": {"trial": "t7"}},
        container={
            "env": env,
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings"}}],
            "args": ["$(POD)", "$$(POD)"],
            "resources": {"limits": {"cpu": "500m"}},
        },
    )
    created = core.create_namespaced_pod(NS, manifest)
    wait_for(lambda: phase_of(core, "env") == "Succeeded", message="env pod done")
    lines = core.read_namespaced_pod_log("env", NS).splitlines()
    assert lines[:-1] == sorted(
        [
            "CFG_opt=adam",
            "CPU=500",
            "DERIVED=v-x",
            "HOME=/root",
            "HOSTNAME=env",
            "KEY=s3cr3t",
            "KUBERNETES_SERVICE_HOST=127.0.0.1",
            "LR=0.1",
            "PLAIN=v",
            "POD=env",
            "TRIAL=t7",
            f"UID={created.metadata.uid}",
        ]
    )
    assert lines[-1] == "env $(POD)"


def test_missing_configmap_blocks_with_create_container_config_error(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    env = [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "x"}}}]
    core.create_namespaced_pod(NS, pod_manifest("blocked", "echo $X", container={"env": env}))
    wait_for(lambda: states(core.read_namespaced_pod("blocked", NS)) == ["CreateContainerConfigError"])
    status = core.read_namespaced_pod("blocked", NS).status
    assert (
        status.phase == "Pending"
        and status.container_statuses[0].state.waiting.message == 'configmap "later" not found'
    )
    core.create_namespaced_config_map(NS, {"metadata": {"name": "later"}, "data": {"x": "now"}})
    wait_for(lambda: phase_of(core, "blocked") == "Succeeded")
    assert core.read_namespaced_pod_log("blocked", NS) == "now\n"


def test_volumes_map_to_host_directories(
    cluster: KubernetesEmulator, core: client.CoreV1Api, storage: dict[str, Path]
) -> None:
    (storage["export"] / "code.py").write_text("print('from nfs')\n")
    core.create_namespaced_secret(
        NS,
        {
            "metadata": {"name": "azure"},
            "stringData": {"azurestorageaccountname": "acct", "azurestorageaccountkey": "k"},
        },
    )
    core.create_namespaced_persistent_volume_claim(
        NS,
        {
            "metadata": {"name": "ckpt"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": "scripts"}, "data": {"run.sh": "echo from configmap\n"}}
    )
    volumes = [
        {"name": "nni-vol", "nfs": {"server": "nfs.example", "path": "/exports/nni"}},
        {"name": "share", "azureFile": {"secretName": "azure", "shareName": "trials", "readOnly": False}},
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}},
        {"name": "scripts", "configMap": {"name": "scripts", "defaultMode": 0o755}},
    ]
    mounts = [
        {"name": "nni-vol", "mountPath": "/tmp/mount"},
        {"name": "share", "mountPath": "/mnt/share"},
        {"name": "ckpt", "mountPath": "/adaptdl/checkpoint", "subPath": "adaptdl/checkpoint"},
        {"name": "scripts", "mountPath": "/opt/run.sh", "subPath": "run.sh"},
    ]
    script = (
        "python3 /tmp/mount/code.py && echo out > /mnt/share/result && echo saved > /adaptdl/checkpoint/state "
        "&& /opt/run.sh && (echo x 2>/dev/null >/opt/run.sh || echo read-only)"
    )
    core.create_namespaced_pod(
        NS, pod_manifest("vols", script, volumes=volumes, container={"volumeMounts": mounts})
    )
    wait_for(lambda: phase_of(core, "vols") in ("Succeeded", "Failed"), message="volumes pod done")
    assert core.read_namespaced_pod_log("vols", NS) == "from nfs\nfrom configmap\nread-only\n"
    assert (storage["share"] / "result").read_text() == "out\n"
    claim = core.read_namespaced_persistent_volume_claim("ckpt", NS)
    assert claim.status.phase == "Bound" and claim.spec.volume_name == f"pvc-{claim.metadata.uid}"
    classes = client.StorageV1Api(core.api_client).list_storage_class().items
    assert [(c.metadata.name, c.provisioner) for c in classes] == [
        (claim.spec.storage_class_name, "emulator.local/hostpath")
    ]
    assert (
        cluster.directory / "pvc" / NS / "ckpt" / "adaptdl" / "checkpoint" / "state"
    ).read_text() == "saved\n"
    assert not Path("/tmp/mount/code.py").exists()  # mounted inside the container only


def test_unmountable_volume_waits_with_failed_mount(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    volumes = [{"name": "share", "azureFile": {"secretName": "missing", "shareName": "trials"}}]
    mounts = [{"name": "share", "mountPath": "/mnt/share"}]
    core.create_namespaced_pod(
        NS, pod_manifest("nomount", "true", volumes=volumes, container={"volumeMounts": mounts})
    )

    def failed_mount() -> list[str]:
        return [e.message for e in core.list_namespaced_event(NS).items if e.reason == "FailedMount"]

    messages = wait_for(failed_mount, message="FailedMount event")
    assert messages[0] == 'MountVolume.SetUp failed for volume "share" : Couldn\'t get secret default/missing'
    assert states(core.read_namespaced_pod("nomount", NS)) == ["ContainerCreating"]


def test_on_failure_restarts_in_place(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_manifest("flaky", "echo attempt; exit 2", restart="OnFailure"))

    def restarted_twice() -> client.V1ContainerStatus | None:
        status = (core.read_namespaced_pod("flaky", NS).status.container_statuses or [None])[0]
        return status if status is not None and status.restart_count >= 2 else None

    status = wait_for(restarted_twice, message="two restarts")
    assert phase_of(core, "flaky") == "Running"
    assert status.last_state.terminated.exit_code == 2 and status.last_state.terminated.reason == "Error"
    waiting = wait_for(
        lambda: core.read_namespaced_pod("flaky", NS).status.container_statuses[0].state.waiting
    )
    assert (
        waiting.reason == "CrashLoopBackOff"
        and "restarting failed container=main pod=flaky_default(" in waiting.message
    )
    assert core.read_namespaced_pod_log("flaky", NS, previous=True) == "attempt\n"


def test_log_options_and_errors(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    two = pod_manifest("two", "seq 1 5")
    two["spec"]["containers"].append(
        {"name": "side", "image": "busybox", "command": ["sh", "-c", "echo side"]}
    )
    core.create_namespaced_pod(NS, two)
    wait_for(lambda: phase_of(core, "two") == "Succeeded")
    assert core.read_namespaced_pod_log("two", NS, container="main", tail_lines=2) == "4\n5\n"
    assert core.read_namespaced_pod_log("two", NS, container="main", limit_bytes=3) == "1\n2"
    with pytest.raises(client.ApiException) as ambiguous:
        core.read_namespaced_pod_log("two", NS)
    assert (
        json.loads(ambiguous.value.body)["message"]
        == "a container name must be specified for pod two, choose one of: [main side]"
    )
    with pytest.raises(client.ApiException) as previous:
        core.read_namespaced_pod_log("two", NS, container="main", previous=True)
    assert (
        json.loads(previous.value.body)["message"]
        == 'previous terminated container "main" in pod "two" not found'
    )
    cluster.block_scheduling()
    core.create_namespaced_pod(NS, pod_manifest("unplaced", "true"))
    with pytest.raises(client.ApiException) as waiting:
        core.read_namespaced_pod_log("unplaced", NS)
    assert (
        json.loads(waiting.value.body)["message"]
        == 'container "main" in pod "unplaced" is waiting to start: ContainerCreating'
    )


def test_follow_streams_until_the_container_ends(
    cluster: KubernetesEmulator, core: client.CoreV1Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second"
    core.create_namespaced_pod(NS, pod_manifest("follow", script))
    wait_for(lambda: phase_of(core, "follow") == "Running")
    lines = []
    for line in watch.Watch().stream(core.read_namespaced_pod_log, "follow", NS, follow=True):
        lines.append(line)
        if line == "first":
            gate.touch()
    assert lines == ["first", "second"]


def test_delete_sends_sigterm_and_removes_the_pod(
    cluster: KubernetesEmulator, core: client.CoreV1Api, tmp_path: Path
) -> None:
    marker = tmp_path / "terminated"
    script = f"trap 'echo term > {marker}; exit 0' TERM; echo up; while true; do sleep 0.05; done"
    core.create_namespaced_pod(NS, pod_manifest("victim", script))
    wait_for(
        lambda: phase_of(core, "victim") == "Running" and core.read_namespaced_pod_log("victim", NS) == "up\n"
    )
    deleted = core.delete_namespaced_pod("victim", NS)
    assert (
        deleted.metadata.deletion_timestamp is not None
        and deleted.metadata.deletion_grace_period_seconds == 30
    )
    wait_for(
        lambda: "victim" not in [p.metadata.name for p in core.list_namespaced_pod(NS).items],
        message="pod removed",
    )
    assert marker.read_text() == "term\n"


def test_image_pull_failure_then_recovery(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    cluster.fail_image_pulls("registry.example/private/*")
    core.create_namespaced_pod(
        NS, pod_manifest("pull", "echo pulled", container={"image": "registry.example/private/trial:1"})
    )
    reasons = set()

    def both_reasons() -> bool:
        reasons.update(states(core.read_namespaced_pod("pull", NS)))
        return {"ErrImagePull", "ImagePullBackOff"} <= reasons

    wait_for(both_reasons, message="ErrImagePull then ImagePullBackOff")
    assert phase_of(core, "pull") == "Pending"
    cluster.heal_image_pulls()
    wait_for(lambda: phase_of(core, "pull") == "Succeeded")


def test_oom_kill(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_manifest("hungry", "echo eating; sleep 60"))
    wait_for(lambda: phase_of(core, "hungry") == "Running")
    cluster.oom_kill(NS, "hungry")
    wait_for(lambda: phase_of(core, "hungry") == "Failed")
    terminated = core.read_namespaced_pod("hungry", NS).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")


def test_unschedulable_pods_stay_pending(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    greedy = pod_manifest("greedy", "true", container={"resources": {"limits": {"nvidia.com/gpu": 2}}})
    core.create_namespaced_pod(NS, greedy)

    def unschedulable() -> Any:
        conditions = core.read_namespaced_pod("greedy", NS).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled" and c.status == "False"), None)

    condition = wait_for(unschedulable, message="Unschedulable")
    assert (condition.reason, condition.message) == (
        "Unschedulable",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    cluster.block_scheduling("0/1 nodes are available: 1 Insufficient cpu.")
    core.create_namespaced_pod(NS, pod_manifest("quota", "true"))
    wait_for(lambda: (core.read_namespaced_pod("quota", NS).status.conditions or [None])[0])
    assert core.read_namespaced_pod("quota", NS).spec.node_name is None
    cluster.unblock_scheduling()
    wait_for(lambda: phase_of(core, "quota") == "Succeeded")


def test_node_loss(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_manifest("stranded", "sleep 60"))
    wait_for(lambda: phase_of(core, "stranded") == "Running")
    version = core.list_namespaced_pod(NS).metadata.resource_version
    cluster.lose_node("node-1")
    history = []
    watcher = watch.Watch()
    for event in watcher.stream(core.list_namespaced_pod, NS, resource_version=version, timeout_seconds=20):
        history.append(event["object"])
        if event["type"] == "DELETED":
            watcher.stop()
    failed = next(p for p in history if p.status.phase == "Failed")
    disruption = next(c for c in failed.status.conditions if c.type == "DisruptionTarget")
    assert (disruption.reason, disruption.message) == ("DeletionByPodGC", "PodGC: node no longer exists")
    assert any(
        p.metadata.deletion_timestamp and p.status.phase == "Running" for p in history
    )  # evicted, Terminating
    assert client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig))).list_node().items == []


def test_unknown_entrypoint_is_a_start_error(cluster: KubernetesEmulator, core: client.CoreV1Api) -> None:
    manifest = pod_manifest("noentry", "")
    del manifest["spec"]["containers"][0]["command"]
    core.create_namespaced_pod(NS, manifest)
    wait_for(lambda: phase_of(core, "noentry") == "Failed")
    terminated = core.read_namespaced_pod("noentry", NS).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (128, "StartError")


def test_kubelet_restart_keeps_containers_running(
    cluster: KubernetesEmulator, core: client.CoreV1Api, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    core.create_namespaced_pod(
        NS, pod_manifest("steady", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo done")
    )
    wait_for(lambda: phase_of(core, "steady") == "Running")
    cluster.restart_controller("kubelet")
    gate.touch()
    wait_for(lambda: phase_of(core, "steady") == "Succeeded")
    assert core.read_namespaced_pod_log("steady", NS) == "done\n"


def test_pod_bound_to_an_unknown_node_never_starts(
    cluster: KubernetesEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod_manifest("stray", "true", nodeName="node-9"))
    core.create_namespaced_pod(NS, pod_manifest("normal", "true"))
    wait_for(lambda: phase_of(core, "normal") == "Succeeded")
    stray = core.read_namespaced_pod("stray", NS)
    assert (stray.status.phase, stray.status.container_statuses) == ("Pending", None)


@pytest.mark.parametrize("knob", [False, True], ids=["at-start", "set_scheduling_latency"])
def test_scheduling_delay_on_a_manual_clock(tmp_path: Path, knob: bool) -> None:
    emulator = start(tmp_path / "slow", operators=[], clock=ManualClock(), schedule_delay=None if knob else 600)
    if knob:
        emulator.set_scheduling_latency(600)
    try:
        core = client.CoreV1Api(config.new_client_from_config(str(emulator.kubeconfig)))
        core.create_namespaced_pod(NS, pod_manifest("queued", "true"))
        emulator.advance(599)
        assert core.read_namespaced_pod("queued", NS).spec.node_name is None
        wait_for(lambda: emulator.advance(50) and phase_of(core, "queued") == "Succeeded")
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []
