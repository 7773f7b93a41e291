"""What the platform's faults do to a trial: infrastructure failures (image pulls, OOM kills, lost nodes), ends
decided outside trialfleet, a failing replica, and an API server whose watches expire, drop or are refused.

The emulator runs a container's processes on this machine; when the platform kills a container it kills the
container's session (the entry point and the keeper) and the trial, in a session of its own, is left: these
tests end it themselves (a real container's processes all die with it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import (
    FC_ROLE,
    KF_ROLE,
    fc_config,
    kubeflow_config,
    started,
    trial_host,
    trial_spec,
    write_trial,
)
from kubernetes import client, config

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import wait_for
from trialfleet.errors import PlatformError
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import Seen, TrialHost, make_context, poll_until
from trialfleet.training_services.kubernetes.service import (
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)

SLEEPER = """
with open(control("trial.pid"), "w") as f:
    f.write(str(os.getpid()))
report("PERIODICAL", 0, 1)
touch("running")
wait_for("release")
report("FINAL", 0, 2)
"""


def core(cluster: KubernetesEmulator) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))


def pods_of(cluster: KubernetesEmulator, trial_id: str) -> list[Any]:
    return list(core(cluster).list_namespaced_pod("default", label_selector=f"trialId={trial_id}").items)


def resource_gone(cluster: KubernetesEmulator, plural: str, name: str) -> bool:
    custom = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))
    group = "kubeflow.org" if plural in ("tfjobs", "pytorchjobs") else "frameworkcontroller.microsoft.com"
    try:
        custom.get_namespaced_custom_object(group, "v1", "default", plural, name)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def end_orphan(control: TrialHost) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(control.read_text("trial.pid")), signal.SIGKILL)


def ended(seen: Seen, trial_id: str) -> tuple[TrialStatus, FailureKind | None, str]:
    end = seen.ended[trial_id]
    return end.status, end.failure_kind, end.message or ""


async def test_an_image_that_cannot_be_pulled_is_an_infrastructure_failure(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    cluster.fail_image_pulls("registry.example.org/broken*")
    role = {**FC_ROLE, "dockerImage": "registry.example.org/broken:1"}
    (tmp_path / "code").mkdir()
    async with started(
        FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster, taskRoles=[role])
    ) as service:
        submitted = await service.submit(trial_spec("pull", "true", tmp_path / "code"))
        seen = await poll_until(service, lambda s: "pull" in s.ended)
        status, kind, message = ended(seen, "pull")
        assert (status, kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        assert "cannot pull image 'registry.example.org/broken:1'" in message
        name = submitted.handle["name"]  # type: ignore[union-attr]
        assert wait_for(lambda: resource_gone(cluster, "frameworks", name), message="its Framework deleted")
        assert pods_of(cluster, "pull") == []


async def test_an_oom_killed_container_is_an_infrastructure_failure(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "sleeper.py", SLEEPER)
    command = f"python3 sleeper.py {control.seen_by_trials}"
    try:
        async with started(
            FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)
        ) as service:
            await service.submit(trial_spec("oom", command, tmp_path / "code"))
            await control.wait_for("running")
            (pod,) = pods_of(cluster, "oom")
            cluster.oom_kill("default", pod.metadata.name)
            seen = await poll_until(service, lambda s: "oom" in s.ended)
    finally:
        end_orphan(control)
    status, kind, message = ended(seen, "oom")
    assert (status, kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    assert "OOMKilled" in message
    assert [m.sequence for m in seen.metrics] == [0]


async def test_a_lost_node_is_an_infrastructure_failure(tmp_path: Path, cluster: KubernetesEmulator) -> None:
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "sleeper.py", SLEEPER)
    command = f"python3 sleeper.py {control.seen_by_trials}"
    config = kubeflow_config(tmp_path, cluster, "tf-operator", worker=KF_ROLE)
    try:
        async with started(KubeflowTrainingService, tmp_path, config) as service:
            await service.submit(trial_spec("lost", command, tmp_path / "code"))
            await control.wait_for("running")
            (pod,) = pods_of(cluster, "lost")
            cluster.lose_node(pod.spec.node_name)
            seen = await poll_until(service, lambda s: "lost" in s.ended)
    finally:
        end_orphan(control)
    status, kind, message = ended(seen, "lost")
    assert (status, kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
    # the taint manager's eviction, or the pod garbage collector's mark a step later, whichever a poll sees first
    assert message in (
        "pod nni-exp-k8s-trial-lost-worker-0: DeletionByTaintManager: Taint manager: deleting due to NoExecute taint",
        "pod nni-exp-k8s-trial-lost-worker-0: DeletionByPodGC: PodGC: node no longer exists",
    )


async def test_a_framework_stopped_outside_trialfleet_is_user_canceled(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "sleeper.py", SLEEPER)
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        submitted = await service.submit(
            trial_spec("stop", f"python3 sleeper.py {control.seen_by_trials}", tmp_path / "code")
        )
        await control.wait_for("running")
        custom = client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))
        name = submitted.handle["name"]  # type: ignore[union-attr]
        body = {"spec": {"executionType": "Stop"}}
        custom.patch_namespaced_custom_object(
            "frameworkcontroller.microsoft.com", "v1", "default", "frameworks", name, body
        )
        seen = await poll_until(service, lambda s: "stop" in s.ended)
    status, kind, message = ended(seen, "stop")
    assert (status, kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
    assert "StopFrameworkRequested (completion code -210)" in message


async def test_another_replica_failing_fails_the_trial(tmp_path: Path, cluster: KubernetesEmulator) -> None:
    """Worker 1 fails: the TFJob fails, its running replicas (worker 0, the trial's) are stopped."""
    control = trial_host(tmp_path)
    write_trial(
        tmp_path / "code",
        "two.py",
        """
        if os.environ["NNI_SYS_DIR"].endswith("/replicas/worker-1"):
            wait_for("running")
            sys.exit(3)
        report("PERIODICAL", 0, 1)
        touch("running")
        wait_for("release")
        """,
    )
    config = kubeflow_config(tmp_path, cluster, "tf-operator", worker={**KF_ROLE, "replicas": 2})
    async with started(KubeflowTrainingService, tmp_path, config) as service:
        await service.submit(trial_spec("two", f"python3 two.py {control.seen_by_trials}", tmp_path / "code"))
        seen = await poll_until(service, lambda s: "two" in s.ended)
    status, kind, message = ended(seen, "two")
    assert (status, kind) == (TrialStatus.FAILED, FailureKind.USER_CODE)
    assert "has failed because 1 Worker replica(s) failed" in message
    assert [m.sequence for m in seen.metrics] == [0]
    replica = json.loads((tmp_path / "nfs/nni/k8s/trials/two/replicas/worker-1/result.json").read_text())
    assert replica["exit_code"] == 3


def lists(cluster: KubernetesEmulator, plural: str, *, watch: bool) -> int:
    """The requests listing (or watching) the experiment's resources of a kind."""
    return sum(
        1
        for r in cluster.requests.all()
        if r.method == "GET" and r.path.endswith(f"/{plural}") and (("watch", "True") in r.query) == watch
    )


def cut_until(cluster: KubernetesEmulator, condition: Callable[[], bool], message: str) -> None:
    """Cut the open watches until ``condition``, again each second: a watch whose request was just seen may not
    be open yet when the first cut comes."""
    cut = 0.0

    def cut_or_done() -> bool:
        nonlocal cut
        if condition():
            return True
        if time.monotonic() - cut > 1.0:
            cluster.drop_watches()
            cut = time.monotonic()
        return False

    wait_for(cut_or_done, message=message)


async def test_watches_resume_from_their_version_and_list_again_after_410(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "sleeper.py", SLEEPER)
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        await service.submit(
            trial_spec("w", f"python3 sleeper.py {control.seen_by_trials}", tmp_path / "code")
        )
        await poll_until(service, lambda s: "w" in s.started)
        before = lists(cluster, "frameworks", watch=False)
        cluster.drop_watches()  # resumed from the last version: no list needed
        wait_for(lambda: lists(cluster, "frameworks", watch=True) >= 2, message="a resumed watch")
        assert lists(cluster, "frameworks", watch=False) == before
        # the frameworks informer's resumed watch gets 410 and must list again (the pods informer's watch may
        # resume at any moment meanwhile: an expiry for any resource could be taken by it, twice)
        cluster.faults.expire_next_watch(1, plural="frameworks")
        cut_until(cluster, lambda: lists(cluster, "frameworks", watch=False) > before, "a new list after 410")
        control.touch("release")
        seen = await poll_until(service, lambda s: "w" in s.ended)
    assert seen.ended["w"].status == TrialStatus.SUCCEEDED
    assert [(m.type, m.sequence) for m in seen.metrics] == [("PERIODICAL", 0), ("FINAL", 0)]


async def test_without_watches_the_informers_fall_back_to_lists(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    cluster.faults.deny("frameworks", verb="watch", group="frameworkcontroller.microsoft.com")
    cluster.faults.deny("pods", verb="watch")
    write_trial(tmp_path / "code", "quick.py", 'report("FINAL", 0, 5)\n')
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        await service.submit(trial_spec("l", "python3 quick.py", tmp_path / "code"))
        seen = await poll_until(service, lambda s: "l" in s.ended)
    assert seen.ended["l"].status == TrialStatus.SUCCEEDED
    assert [m.data for m in seen.metrics] == ["5"]
    assert lists(cluster, "frameworks", watch=False) >= 2


async def test_a_transient_api_error_defers_the_submission(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    write_trial(tmp_path / "code", "quick.py", 'report("FINAL", 0, 5)\n')
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        cluster.faults.fail_next(1, code=503, method="POST", path="frameworks")
        spec = trial_spec("t", "python3 quick.py", tmp_path / "code")
        deferred = await service.submit(spec)
        assert "503" in getattr(deferred, "reason", ""), deferred
        await service.submit(spec)
        seen = await poll_until(service, lambda s: "t" in s.ended)
    assert seen.ended["t"].status == TrialStatus.SUCCEEDED


async def test_a_resource_too_new_to_be_read_is_found_by_its_create_conflict(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    """Submitted again after a restart while the API server still answers 404 for it: the create says 409."""
    write_trial(tmp_path / "code", "quick.py", 'report("FINAL", 0, 5)\n')
    config = fc_config(tmp_path, cluster)
    spec = trial_spec("again", "python3 quick.py", tmp_path / "code")
    cluster.block_scheduling()  # its pod waits: nothing of the first submission ran yet
    first = FrameworkControllerTrainingService(make_context(tmp_path / "experiment", config, "k8s"))
    await first.start()
    cluster.faults.lag_reads_after_create(1)
    handle = (await first.submit(spec)).handle  # type: ignore[union-attr]
    await first.close(kill_trials=False)  # the manager dies before it records the handle
    async with started(FrameworkControllerTrainingService, tmp_path, config) as second:
        assert (await second.submit(spec)).handle == handle  # type: ignore[union-attr]
        cluster.unblock_scheduling()
        seen = await poll_until(second, lambda s: "again" in s.ended)
    assert seen.ended["again"].status == TrialStatus.SUCCEEDED
    creates = [r for r in cluster.requests.all() if r.method == "POST" and r.path.endswith("/frameworks")]
    assert [r.status for r in creates] == [201, 409]


async def test_a_refused_create_fails_the_trial_with_the_servers_words(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    cluster.faults.deny("frameworks", verb="create", group="frameworkcontroller.microsoft.com")
    (tmp_path / "code").mkdir()
    async with started(FrameworkControllerTrainingService, tmp_path, fc_config(tmp_path, cluster)) as service:
        with pytest.raises(PlatformError) as refused:
            await service.submit(trial_spec("rbac", "true", tmp_path / "code"))
    message = str(refused.value)
    assert message.startswith(
        f"frameworkcontroller: the Kubernetes API server {cluster.url} refused to create "
    )
    assert (
        'frameworks.frameworkcontroller.microsoft.com "nniexpk8strialrbac" in namespace "default": 403 Forbidden'
        in message
    )
    assert 'cannot create resource "frameworks" in API group "frameworkcontroller.microsoft.com"' in message
