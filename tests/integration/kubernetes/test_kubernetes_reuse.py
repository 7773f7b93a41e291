"""Reuse mode on Kubeflow and FrameworkController (NNI's default there), on the emulated cluster through the real
``kubernetes`` client: trials run one after another in one worker resource, share a worker's GPUs, are cancelled
one at a time, fail as infrastructure failures when their worker is deleted, are re-adopted with their worker by a
restarted manager and never run twice; idle workers are released; a job of several pods is one resource per trial
and the log says why. The contract suite runs in reuse mode too (test_contract_kubernetes.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
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
from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing import Seen, TrialHost, make_context, poll_until
from trialfleet.training_services.kubernetes.config import FrameworkControllerConfig, KubeflowConfig
from trialfleet.training_services.kubernetes.service import (
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)
from trialfleet.training_services.spec import Submitted

FC = ("frameworkcontroller.microsoft.com", "frameworks")
TF = ("kubeflow.org", "tfjobs")
SLEEPER = """
with open(control(os.environ["NNI_TRIAL_JOB_ID"] + ".pid"), "w") as f:
    f.write(str(os.getpid()))
with open(control(os.environ["NNI_TRIAL_JOB_ID"] + ".runs"), "a") as f:
    f.write("run\\n")
report("PERIODICAL", 0, 1)
touch(os.environ["NNI_TRIAL_JOB_ID"] + ".running")
wait_for("release")
report("FINAL", 0, 2)
"""


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[TrialHost, str]]:
    """The control directory, and the command of a trial that holds until ``release``; trials left are ended."""
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "sleeper.py", SLEEPER)
    try:
        yield control, f"python3 sleeper.py {control.seen_by_trials}"
    finally:
        end_orphans(control)


async def left_running(service_class: Any, context: Any, control: TrialHost, command: str, code: Path) -> Any:
    """A first manager submits trial "kept" and stops while it runs (its worker runs on): its handle and the
    cursor of the metric it saw."""
    first = service_class(context)
    await first.start()
    handle = await submit(first, "kept", command, code)
    await control.wait_for("kept.running")
    seen = await poll_until(first, lambda s: len(s.metrics) == 1)
    await first.close(kill_trials=False)
    return handle, seen.metrics[0].cursor


def platforms(root: Path, cluster: KubernetesEmulator, platform: str, **fields: Any) -> tuple[Any, Any, Any]:
    """The service class, the config block (``fields`` added) and the resource kind of ``platform``."""
    if platform == "frameworkcontroller":
        return FrameworkControllerTrainingService, fc_config(root, cluster, **fields), FC
    fields.setdefault("worker", KF_ROLE)
    return KubeflowTrainingService, kubeflow_config(root, cluster, "tf-operator", **fields), TF


def custom(cluster: KubernetesEmulator) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(config.new_client_from_config(str(cluster.kubeconfig)))


def creates(cluster: KubernetesEmulator, plural: str) -> int:
    return sum(1 for r in cluster.requests.all() if r.method == "POST" and r.path.endswith(f"/{plural}"))


def resource(cluster: KubernetesEmulator, kind: tuple[str, str], name: str) -> dict[str, Any] | None:
    try:
        return custom(cluster).get_namespaced_custom_object(kind[0], "v1", "default", kind[1], name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def finished(obj: dict[str, Any] | None) -> bool:
    """The worker's resource ended by itself, successfully (its worker exited 0), or is gone."""
    if obj is None:
        return True
    status = obj.get("status") or {}
    if status.get("state") == "Completed":
        return True
    return any(
        c.get("type") == "Succeeded" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def end_orphans(control: TrialHost) -> None:
    """The emulator kills a container's session; a trial has one of its own (a real container's die with it)."""
    for pid_file in control.local.glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def ended(seen: Seen, trial_id: str) -> tuple[TrialStatus, FailureKind | None]:
    return seen.ended[trial_id].status, seen.ended[trial_id].failure_kind


async def submit(service: Any, trial_id: str, command: str, code: Path, **fields: Any) -> dict[str, Any]:
    submitted = await service.submit(trial_spec(trial_id, command, code, **fields))
    assert isinstance(submitted, Submitted), submitted
    return dict(submitted.handle)


def test_reuse_mode_is_nni_s_default_on_kubeflow_and_frameworkcontroller(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    fc = fc_config(tmp_path, cluster).model_dump(by_alias=True, exclude={"reuse_mode"}, exclude_none=True)
    assert FrameworkControllerConfig.model_validate(fc).reuse_mode is True
    kf = kubeflow_config(tmp_path, cluster, "tf-operator", worker=KF_ROLE)
    kf_data = kf.model_dump(by_alias=True, exclude={"reuse_mode"}, exclude_none=True)
    assert KubeflowConfig.model_validate(kf_data).reuse_mode is True


@pytest.mark.parametrize("platform", ["frameworkcontroller", "tfjob"])
async def test_trials_run_one_after_another_in_one_worker_resource(
    tmp_path: Path, cluster: KubernetesEmulator, platform: str
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    service_class, block, kind = platforms(tmp_path, cluster, platform, reuseMode=True)
    async with started(service_class, tmp_path, block) as service:
        names = set()
        for n in range(3):
            handle = await submit(service, f"t{n}", f'echo {n} > "$NNI_OUTPUT_DIR/out"', code)
            names.add(handle["name"])
            seen = await poll_until(service, lambda s, n=n: f"t{n}" in s.ended)
            assert ended(seen, f"t{n}") == (TrialStatus.SUCCEEDED, None)
            assert (Path(handle["trial_dir_here"]) / "out").read_text() == f"{n}\n"
        (name,) = names
        assert name.startswith("nni-exp-k8s-env-w" if platform == "tfjob" else "nniexpk8senvw")
        assert creates(cluster, kind[1]) == 1
    assert wait_for(lambda: finished(resource(cluster, kind, name)), message="the worker released at the end")


@pytest.mark.parametrize("platform", ["frameworkcontroller", "tfjob"])
async def test_a_cancelled_trial_leaves_its_worker_running_for_the_next(
    tmp_path: Path, cluster: KubernetesEmulator, sleeper: tuple[TrialHost, str], platform: str
) -> None:
    control, command = sleeper
    service_class, block, kind = platforms(tmp_path, cluster, platform, reuseMode=True)
    async with started(service_class, tmp_path, block) as service:
        first = await submit(service, "held", command, tmp_path / "code")
        await control.wait_for("held.running")
        await service.cancel("held")
        seen = await poll_until(service, lambda s: "held" in s.ended)
        assert ended(seen, "held") == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        with pytest.raises(ProcessLookupError):  # the trial's process tree ended with it
            os.kill(int(control.read_text("held.pid")), 0)
        second = await submit(service, "next", "true", tmp_path / "code")
        assert second["name"] == first["name"]
        seen = await poll_until(service, lambda s: "next" in s.ended)
        assert ended(seen, "next") == (TrialStatus.SUCCEEDED, None)
        assert creates(cluster, kind[1]) == 1


async def test_a_worker_deleted_outside_trialfleet_fails_its_trial_for_a_retry_elsewhere(
    tmp_path: Path, cluster: KubernetesEmulator, sleeper: tuple[TrialHost, str]
) -> None:
    control, command = sleeper
    block = fc_config(tmp_path, cluster, reuseMode=True)
    async with started(FrameworkControllerTrainingService, tmp_path, block) as service:
        handle = await submit(service, "lost", command, tmp_path / "code")
        await control.wait_for("lost.running")
        custom(cluster).delete_namespaced_custom_object(FC[0], "v1", "default", FC[1], handle["name"])
        seen = await poll_until(service, lambda s: "lost" in s.ended)
        assert ended(seen, "lost") == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        end_orphans(control)
        control.touch("release")
        retry = await submit(service, "lost", command, tmp_path / "code", attempt=1)
        assert retry["name"] != handle["name"]
        seen = await poll_until(service, lambda s: "lost" in s.ended)
        assert ended(seen, "lost") == (TrialStatus.SUCCEEDED, None)


@pytest.mark.parametrize("platform", ["frameworkcontroller", "tfjob"])
@pytest.mark.parametrize("how", ["adopted", "submitted again"])
async def test_a_restarted_manager_re_adopts_its_worker_and_its_trial_which_runs_once(
    tmp_path: Path, cluster: KubernetesEmulator, sleeper: tuple[TrialHost, str], platform: str, how: str
) -> None:
    """``adopt`` with the stored handle and cursor (the manager's resume), or ``submit`` of the same attempt (a
    manager killed before it recorded the handle): the same worker, the trial run once, its metrics once."""
    control, command = sleeper
    service_class, block, kind = platforms(tmp_path, cluster, platform, reuseMode=True)
    context = make_context(tmp_path / "experiment", block, "k8s")
    handle, cursor = await left_running(service_class, context, control, command, tmp_path / "code")
    second = service_class(context)
    await second.start()
    try:
        if how == "adopted":
            await second.adopt("kept", handle, cursor)
        else:
            assert await submit(second, "kept", command, tmp_path / "code") == handle
        control.touch("release")
        seen = await poll_until(second, lambda s: "kept" in s.ended)
        assert ended(seen, "kept") == (TrialStatus.SUCCEEDED, None)
        # exactly once: the first was delivered with the cursor that adopt is given; a resubmission had none
        expected = ["FINAL"] if how == "adopted" else ["PERIODICAL", "FINAL"]
        assert [m.type for m in seen.metrics] == expected
        assert control.read_text("kept.runs") == "run\n"
        after = await submit(second, "after", "true", tmp_path / "code")
        assert after["name"] == handle["name"]  # the worker re-adopted takes the next trial
        seen = await poll_until(second, lambda s: "after" in s.ended, seen)
        assert ended(seen, "after") == (TrialStatus.SUCCEEDED, None)
        assert creates(cluster, kind[1]) == 1
    finally:
        await second.close()


async def test_a_worker_with_a_gpu_runs_max_trial_number_per_gpu_trials_at_once(
    tmp_path: Path, cluster: KubernetesEmulator, sleeper: tuple[TrialHost, str]
) -> None:
    control, command = sleeper
    block = fc_config(
        tmp_path, cluster, reuseMode=True, maxTrialNumberPerGpu=2, taskRoles=[{**FC_ROLE, "gpuNumber": 1}]
    )
    async with started(FrameworkControllerTrainingService, tmp_path, block) as service:
        handles = [await submit(service, f"g{n}", command, tmp_path / "code") for n in range(3)]
        for n in range(3):
            await control.wait_for(f"g{n}.running")
        assert handles[0]["name"] == handles[1]["name"] != handles[2]["name"]
        control.touch("release")
        seen = await poll_until(service, lambda s: len(s.ended) == 3)
        assert {ended(seen, f"g{n}") for n in range(3)} == {(TrialStatus.SUCCEEDED, None)}
        assert creates(cluster, "frameworks") == 2


async def test_an_idle_worker_is_released_after_worker_idle_timeout(
    tmp_path: Path, cluster: KubernetesEmulator, sleeper: tuple[TrialHost, str]
) -> None:
    control, command = sleeper
    block = fc_config(tmp_path, cluster, reuseMode=True, workerIdleTimeout=1)
    async with started(FrameworkControllerTrainingService, tmp_path, block) as service:
        held = await submit(service, "held", command, tmp_path / "code")
        await control.wait_for("held.running")
        short = await submit(service, "short", "true", tmp_path / "code")
        assert short["name"] != held["name"]
        seen = await poll_until(service, lambda s: "short" in s.ended)
        # the manager polls on (a trial is live) and releases the idle worker; it exits by itself
        await poll_until(service, lambda s: finished(resource(cluster, FC, short["name"])), seen)
        worker_dir = Path(held["trial_dir_here"]).parents[1] / "workers" / short["worker"]
        assert '"released by the manager"' in (worker_dir / "ended.json").read_text()
        assert not finished(resource(cluster, FC, held["name"]))
        control.touch("release")
        await poll_until(service, lambda s: "held" in s.ended, seen)


@pytest.mark.parametrize(
    ("platform", "shape", "why"),
    [
        (
            "frameworkcontroller",
            {"taskRoles": [{**FC_ROLE, "name": "ps"}, FC_ROLE]},
            "a Framework of 2 tasks (ps x1, worker x1)",
        ),
        ("tfjob", {"worker": {**KF_ROLE, "replicas": 2}}, "a job of 2 replicas (worker x2)"),
    ],
)
async def test_a_job_of_several_pods_is_one_resource_per_trial_and_the_log_says_why(
    tmp_path: Path,
    cluster: KubernetesEmulator,
    caplog: pytest.LogCaptureFixture,
    platform: str,
    shape: dict[str, Any],
    why: str,
) -> None:
    service_class, block, _ = platforms(tmp_path, cluster, platform, reuseMode=True, **shape)
    with caplog.at_level(logging.WARNING):
        async with started(service_class, tmp_path, block) as service:
            assert service.fleet is None
    assert f"reuseMode is not acted on for {why}: a worker runs its trials in one pod" in caplog.text
    assert "every trial attempt is a resource of its own" in caplog.text


async def test_max_trial_number_per_gpu_without_a_gpu_is_named_in_a_warning(
    tmp_path: Path, cluster: KubernetesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    block = fc_config(tmp_path, cluster, reuseMode=True, maxTrialNumberPerGpu=2)
    with caplog.at_level(logging.WARNING):
        async with started(FrameworkControllerTrainingService, tmp_path, block) as service:
            assert service.reuse_policy.slots == 1
    assert "maxTrialNumberPerGpu is not acted on: the role asks for no GPU (gpuNumber)" in caplog.text


async def test_a_worker_whose_image_cannot_be_pulled_fails_its_trial_as_an_infrastructure_failure(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    """The worker's resource stays pending while its pod cannot start: its pod tells, and the worker is deleted."""
    cluster.fail_image_pulls("registry.example.org/broken*")
    role = {**FC_ROLE, "dockerImage": "registry.example.org/broken:1"}
    (tmp_path / "code").mkdir()
    block = fc_config(tmp_path, cluster, reuseMode=True, taskRoles=[role])
    async with started(FrameworkControllerTrainingService, tmp_path, block) as service:
        handle = await submit(service, "pull", "true", tmp_path / "code")
        seen = await poll_until(service, lambda s: "pull" in s.ended)
        assert ended(seen, "pull") == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        assert "cannot pull image 'registry.example.org/broken:1'" in (seen.ended["pull"].message or "")
        await poll_until(service, lambda s: resource(cluster, FC, handle["name"]) is None, seen)
