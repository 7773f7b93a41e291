"""What the Kubernetes platforms' tests share: an emulated cluster with an NFS export, configs pointing at it,
and the trials' side of the contract suite (their control directory, as containers see it, on the export)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.k8s_testing import start
from trialfleet.testing import TRIAL_PRELUDE, TrialHost, make_context, wait_until_gone
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.kubernetes.config import (
    AdlConfig,
    FrameworkControllerConfig,
    KubeflowConfig,
)
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.spec import TrialSpec

NFS_SERVER, NFS_EXPORT = "nfs.example", "/exports"
CONTAINER_ROOT = "/tmp/mount"  # where pods mount the storage (NNI's CONTAINER_MOUNT_PATH)


def start_cluster(root: Path, state: Path | None = None, **options: Any) -> KubernetesEmulator:
    """An emulated cluster whose NFS export ``nfs.example:/exports`` is the directory ``root/nfs``; its own
    state (pods' directories, which it removes as pods go) in ``state``, by default ``root/k8s``."""
    (root / "nfs").mkdir(parents=True, exist_ok=True)
    options.setdefault("nfs_exports", {f"{NFS_SERVER}:{NFS_EXPORT}": root / "nfs"})
    return start(state or root / "k8s", **options)


def nfs_storage(root: Path) -> dict[str, Any]:
    return {
        "storageType": "nfs",
        "server": NFS_SERVER,
        "path": NFS_EXPORT,
        "localMountPoint": str(root / "nfs"),
    }


def local_path(root: Path, container_path: str) -> Path:
    """This machine's path of a path pods see on the storage."""
    return root / "nfs" / Path(container_path).relative_to(CONTAINER_ROOT)


def trial_host(root: Path) -> TrialHost:
    """The contract's control directory on the export: containers see it below /tmp/mount."""
    local = root / "nfs" / "control"
    local.mkdir(parents=True, exist_ok=True)
    return TrialHost(local, f"{CONTAINER_ROOT}/control")


def code_copy(experiment_id: str, code_dir: Path) -> str:
    """Where pods find a code directory of this machine: its copy on the storage."""
    return f"{CONTAINER_ROOT}/nni/{experiment_id}/code/{code_copy_name(code_dir.resolve())}"


def hard_kill(root: Path) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
    """SIGKILL a trial's keeper and its process group, as a crashed node would (the emulator runs containers
    as processes of this machine)."""

    async def kill(handle: Mapping[str, Any]) -> None:
        keeper = json.loads((local_path(root, handle["trial_dir"]) / "keeper.json").read_text())
        os.kill(keeper["keeper_pid"], signal.SIGKILL)
        os.killpg(keeper["pgid"], signal.SIGKILL)
        await wait_until_gone([keeper["keeper_pid"], keeper["pid"]])

    return kill


FC_ROLE = {
    "name": "worker",
    "taskNumber": 1,
    "cpuNumber": 1,
    "memorySize": "512mb",
    "gpuNumber": 0,
    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
}
KF_ROLE = {"replicas": 1, "cpuNumber": 1, "memorySize": "512mb"}


def fc_config(root: Path, cluster: KubernetesEmulator, **fields: Any) -> FrameworkControllerConfig:
    data = {
        "trialCommand": "unused",  # each test's spec gives the trial its command
        "kubeconfig": str(cluster.kubeconfig),
        "storage": nfs_storage(root),
        "taskRoles": [FC_ROLE],
        "reuseMode": False,  # NNI's default is true: the tests of one resource per trial say false
        **fields,
    }
    return FrameworkControllerConfig.model_validate(data)


def kubeflow_config(root: Path, cluster: KubernetesEmulator, operator: str, **fields: Any) -> KubeflowConfig:
    data = {
        "trialCommand": "unused",
        "kubeconfig": str(cluster.kubeconfig),
        "operator": operator,
        "apiVersion": "v1",
        "storage": nfs_storage(root),
        "reuseMode": False,  # NNI's default is true: the tests of one resource per trial say false
        **fields,
    }
    return KubeflowConfig.model_validate(data)


def adl_config(root: Path, cluster: KubernetesEmulator, **fields: Any) -> AdlConfig:
    nfs = {"server": NFS_SERVER, "path": NFS_EXPORT, "containerMountPath": CONTAINER_ROOT}
    data = {
        "trialCommand": "unused",
        "kubeconfig": str(cluster.kubeconfig),
        "image": "registry.example.org/trial:latest",
        "nfs": {**nfs, "localMountPoint": str(root / "nfs")},
        "cpuNumber": 1,
        "memorySize": "512Mi",
        **fields,
    }
    return AdlConfig.model_validate(data)


def write_trial(code_dir: Path, name: str, body: str) -> None:
    """A trial script with the contract's helpers (report, touch, wait_for on the control directory)."""
    code_dir.mkdir(parents=True, exist_ok=True)
    (code_dir / name).write_text(TRIAL_PRELUDE + textwrap.dedent(body), encoding="utf-8")


def trial_spec(trial_id: str, command: str, code_dir: Path, **fields: Any) -> TrialSpec:
    record = {
        "parameter_id": 1,
        "parameter_source": "algorithm",
        "parameters": {"x": 1},
        "parameter_index": 0,
    }
    return TrialSpec(trial_id, 0, command, code_dir, json.dumps(record), **fields)


@contextlib.asynccontextmanager
async def started(
    service_class: type[TrainingService],
    root: Path,
    config: Any,
    experiment_id: str = "k8s",
    **experiment: Any,
) -> AsyncIterator[Any]:
    """A started service of experiment "k8s" (or ``experiment_id``); closed at the end, its trials killed."""
    service = service_class(make_context(root / "experiment", config, experiment_id, **experiment))
    await service.start()
    try:
        yield service
    finally:
        await service.close(kill_trials=True)
