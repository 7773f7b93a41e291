"""What the Kubernetes platforms submit for a trial, checked against golden files, hostile values included.

Each case starts the service against the emulated cluster and submits one trial; the golden files hold every
object the service POSTed (the custom resource, its Secrets) as the API server received them, and the files
written into the trial directory. Regenerate them after an intended change with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/integration/kubernetes/test_kubernetes_golden.py

and review the diff. The hostile cases then run: every value reaches the trial unchanged, nothing in it is
executed (the kubelet's ``$(VAR)`` expansion included).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import NFS_EXPORT, NFS_SERVER, local_path, start_cluster

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.errors import TrialFileRefusedError
from trialfleet.status import TrialStatus
from trialfleet.testing import make_context, poll_until
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.kubernetes.config import (
    AdlConfig,
    FrameworkControllerConfig,
    KubeflowConfig,
)
from trialfleet.training_services.kubernetes.service import (
    AdlTrainingService,
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)
from trialfleet.training_services.spec import Submitted, TrialSpec

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) $$(touch pwned) `touch pwned` ;|&<> $HOME ünï ✓\nnew line"
ECHO = f'python3 echo.py {shlex.quote(HOSTILE)} "$HOSTILE_VALUE" `echo ok` $(echo ok)'
ECHO_TRIAL = """
import json, os, sys
with open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")) as f:
    parameters = json.load(f)["parameters"]
out = {"argv": sys.argv[1:], "parameters": parameters, "env": os.environ.get("HOSTILE_VALUE"),
       "cwd": os.getcwd(), "platform": os.environ["NNI_PLATFORM"], "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
"""
REGISTRY_AUTH = {"auths": {"registry.example.org": {"auth": "dXNlcjpwYXNz"}}}
FC_ROLE = {
    "name": "worker",
    "taskNumber": 1,
    "cpuNumber": 1,
    "memorySize": "1gb",
    "gpuNumber": 0,
    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
}
KF_ROLE = {"replicas": 1, "cpuNumber": 0.5, "memorySize": 2048}

CASES: dict[str, dict[str, Any]] = {
    "frameworkcontroller_minimal": {
        "platform": "frameworkcontroller",
        "config": {"trialCommand": "python3 echo.py", "taskRoles": [FC_ROLE], "reuseMode": False},
    },
    "frameworkcontroller_hostile": {
        "platform": "frameworkcontroller",
        "config": {
            "serviceAccountName": "frameworkcontroller",
            "taskRoles": [
                {
                    **FC_ROLE,
                    "taskNumber": 2,
                    "command": ECHO,
                    "privateRegistryAuthPath": "registry.json",
                    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 2},
                },
                {**FC_ROLE, "name": "ps", "command": "sleep 600", "dockerImage": "registry.example.org/ps:1"},
            ],
        },
        "hostile": True,
    },
    "frameworkcontroller_azure_file": {
        "platform": "frameworkcontroller",
        "config": {
            "trialCommand": "python3 echo.py",
            "taskRoles": [{**FC_ROLE, "gpuNumber": 1}],
            "reuseMode": False,
        },
        "storage": "azure",
    },
    # reuse mode (NNI's default): the worker's resource, and the trial's files its worker takes
    "frameworkcontroller_reuse_worker": {
        "platform": "frameworkcontroller",
        "config": {"taskRoles": [{**FC_ROLE, "command": ECHO}], "workerIdleTimeout": 300},
        "hostile": True,
    },
    "tfjob_reuse_worker": {
        "platform": "kubeflow",
        "config": {
            "operator": "tf-operator",
            "apiVersion": "v1",
            "worker": {**KF_ROLE, "command": ECHO, "privateRegistryAuthPath": "registry.json"},
        },
        "hostile": True,
    },
    "tfjob_hostile": {
        "platform": "kubeflow",
        "config": {
            "operator": "tf-operator",
            "apiVersion": "v1",
            "worker": {**KF_ROLE, "replicas": 2, "command": ECHO, "privateRegistryAuthPath": "registry.json"},
            "ps": {**KF_ROLE, "command": "sleep 600"},
        },
        "hostile": True,
    },
    "pytorchjob_master_and_workers": {
        "platform": "kubeflow",
        "config": {
            "trialCommand": "python3 echo.py",
            "operator": "pytorch-operator",
            "apiVersion": "v1",
            "master": {**KF_ROLE, "gpuNumber": 1},
            "worker": {**KF_ROLE, "replicas": 2, "gpuNumber": 2, "dockerImage": "pytorch/pytorch:2.3"},
        },
    },
    "adaptdl_hostile": {
        "platform": "adl",
        "config": {
            "trialCommand": ECHO,
            "image": "registry.example.org/cifar10:latest",
            "imagePullSecrets": [{"name": "stagingsecret"}],
            "adaptive": True,
            "checkpoint": {"storageClass": "standard", "storageSize": "2Gi"},
            "cpuNumber": 2,
            "memorySize": "4Gi",
            "trialGpuNumber": 0,
        },
        "storage": "adl",
        "hostile": True,
    },
}
SERVICES: dict[str, Any] = {
    "kubeflow": (KubeflowConfig, KubeflowTrainingService),
    "frameworkcontroller": (FrameworkControllerConfig, FrameworkControllerTrainingService),
    "adl": (AdlConfig, AdlTrainingService),
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A directory whose name is hostile too: it is in every local path the service handles."""
    path = tmp_path / "root 'q' $(touch pwned) ü"
    path.mkdir()
    return path


@pytest.fixture
def cluster(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubernetesEmulator]:
    emulator = start_cluster(root, tmp_path_factory.mktemp("k8s"), azure_shares={"trials": root / "nfs"})
    try:
        yield emulator
    finally:
        errors = emulator.errors()
        emulator.stop()
    assert errors == []


@pytest.fixture
def fake_az(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Azure CLI's ``az keyvault secret show … --query value -o tsv``, answering a fixed key."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/az.args"\necho c3RvcmFnZS1rZXk=\n')
    (bin_dir / "az").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def storage(root: Path, kind: str | None) -> dict[str, Any]:
    local = str(root / "nfs")
    if kind == "azure":
        azure = {
            "azureAccount": "nnistorage",
            "azureShare": "trials",
            "keyVaultName": "vault",
            "keyVaultKey": "key",
        }
        return {"storage": {"storageType": "azureStorage", **azure, "localMountPoint": local}}
    if kind == "adl":
        return {
            "nfs": {
                "server": NFS_SERVER,
                "path": NFS_EXPORT,
                "containerMountPath": "/tmp/mount",
                "localMountPoint": local,
            }
        }
    return {
        "storage": {"storageType": "nfs", "server": NFS_SERVER, "path": NFS_EXPORT, "localMountPoint": local}
    }


async def submit_case(
    root: Path, cluster: KubernetesEmulator, case: dict[str, Any]
) -> tuple[TrainingService, Submitted]:
    code_dir = root / "code"
    code_dir.mkdir()
    (code_dir / "echo.py").write_text(ECHO_TRIAL)
    (root / "registry.json").write_text(json.dumps(REGISTRY_AUTH))
    config_class, service_class = SERVICES[case["platform"]]
    data = {"kubeconfig": str(cluster.kubeconfig), **storage(root, case.get("storage")), **case["config"]}
    config = config_class.model_validate(data, context=_settings(root))
    service = service_class(make_context(root / "experiment", config, "golden"))
    await service.start()
    parameters = {"text": HOSTILE, "n": 1.5} if case.get("hostile") else {"x": 1}
    record = {
        "parameter_id": 3,
        "parameter_source": "algorithm",
        "parameters": parameters,
        "parameter_index": 0,
    }
    env = {"HOSTILE_VALUE": HOSTILE} if case.get("hostile") else {}
    spec = TrialSpec("Tr1al", 5, config.trial_command or "unused", code_dir, json.dumps(record), env=env)
    submitted = await service.submit(spec)
    assert isinstance(submitted, Submitted)
    return service, submitted


def _settings(root: Path) -> dict[str, Any]:
    from trialfleet.config.base import BuildSettings

    return BuildSettings(base_dir=root).context()


def rendered(root: Path, cluster: KubernetesEmulator, submitted: Submitted) -> dict[str, str]:
    posts = [r for r in cluster.requests.all() if r.method == "POST"]
    files = {f"post-{i}-{r.path.rsplit('/', 1)[-1]}.json": _json(r.body) for i, r in enumerate(posts)}
    trial_dir = local_path(root, submitted.handle["trial_dir"])
    for name in sorted(os.listdir(trial_dir)):
        if name.startswith("command") or name in ("parameter.cfg", "assigned.json"):
            text = (trial_dir / name).read_text()
            files[name] = _json(json.loads(text)) if name.endswith(".json") else text
    return {name: _generic(text, root) for name, text in files.items()}


def _json(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def _generic(text: str, root: Path) -> str:
    """Without what changes from run to run: the temporary directory, content digests, uids."""
    text = text.replace(json.dumps(str(root))[1:-1], "<root>").replace(str(root), "<root>")
    text = re.sub(r"entrypoint-[0-9a-f]{16}\.py", "entrypoint-<digest>.py", text)
    text = re.sub(r"\.trialfleet/[0-9a-f]{16}/", ".trialfleet/<version>/", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>", text)
    text = re.sub(
        r"w[0-9a-f]{15}(?![0-9a-f])", "w<worker>", text
    )  # a reuse-mode worker's name (time, random)
    return re.sub(r"/code/[0-9a-f]{16}", "/code/<copy>", text)


@pytest.mark.usefixtures("fake_az")
@pytest.mark.parametrize("name", sorted(CASES))
async def test_submission_matches_the_golden_files(
    root: Path, cluster: KubernetesEmulator, name: str
) -> None:
    service, submitted = await submit_case(root, cluster, CASES[name])
    try:
        files = rendered(root, cluster, submitted)
        directory = GOLDEN / name
        if REGENERATE:
            directory.mkdir(parents=True, exist_ok=True)
            for old in directory.iterdir():
                old.unlink()
            for file, text in files.items():
                (directory / file).write_text(text, encoding="utf-8")
        assert sorted(files) == sorted(p.name for p in directory.iterdir()), (
            f"{directory}: TRIALFLEET_REGEN_GOLDEN=1"
        )
        for file, text in files.items():
            assert text == (directory / file).read_text(encoding="utf-8"), f"{directory / file} differs"
        if CASES[name].get("hostile"):
            await _runs_exactly_as_given(root, service, submitted)
    finally:
        await service.close(kill_trials=True)


async def _runs_exactly_as_given(root: Path, service: TrainingService, submitted: Submitted) -> None:
    seen = await poll_until(service, lambda s: "Tr1al" in s.ended)
    assert seen.ended["Tr1al"].status == TrialStatus.SUCCEEDED, seen.ended["Tr1al"]
    raw = await service.read_trial_file("Tr1al", submitted.handle, "echo.json")
    echoed = json.loads(raw)
    here = service.trial_dir_here(submitted.handle)  # the server streams the trial's files from there
    assert (
        here == local_path(root, submitted.handle["trial_dir"]) and (here / "echo.json").read_bytes() == raw
    )
    with pytest.raises(TrialFileRefusedError):  # the keeper's private input is not served
        await service.read_trial_file("Tr1al", submitted.handle, "command.json")
    assert echoed["argv"] == [HOSTILE, HOSTILE, "ok", "ok"]
    assert echoed["parameters"] == {"text": HOSTILE, "n": 1.5}
    assert echoed["env"] == HOSTILE and echoed["gpus"] == ""
    assert echoed["cwd"].startswith("/tmp/mount/nni/golden/code/")
    assert list(root.parent.rglob("pwned")) == []
