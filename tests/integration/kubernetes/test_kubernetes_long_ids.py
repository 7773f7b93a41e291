"""Long experiment ids on every Kubernetes kind: the operators build their replicas' names from the job's
(the training operator's Services ``<job>-<replicatype>-<index>``, AdaptDL's pod hostnames
``<job>-<group>-<rank>``), and the API server refuses those over 63 characters, as the emulator does. An id
of 32 characters is the longest ``trialfleet create`` accepts; ``resume --experiment_dir`` takes an imported
experiment's id as it is, up to the 63 characters a label value takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import FC_ROLE, KF_ROLE, adl_config, fc_config, kubeflow_config, started, write_trial

from tests.emulators.kubernetes import KubernetesEmulator
from trialfleet.errors import PlatformError
from trialfleet.status import TrialStatus
from trialfleet.testing import poll_until
from trialfleet.training_services.kubernetes.service import (
    AdlTrainingService,
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)
from trialfleet.training_services.spec import TrialSpec

IDS = {
    "32": "experiment-created-with-32-chars",
    "40": "imported_from_nni-2026-12-04-resnet50-v2",
    "63": "Imported.From.Another.Machine-2026-12-04_resnet50-sweep-number7",
}
PS = {
    **FC_ROLE,
    "name": "ps",
    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": -1},
}


def kinds(root: Path, cluster: KubernetesEmulator) -> dict[str, tuple[type, Any]]:
    return {
        "tfjob": (
            KubeflowTrainingService,
            kubeflow_config(root, cluster, "tf-operator", worker={**KF_ROLE, "replicas": 2}),
        ),
        "pytorchjob": (
            KubeflowTrainingService,
            kubeflow_config(
                root, cluster, "pytorch-operator", master=KF_ROLE, worker={**KF_ROLE, "replicas": 2}
            ),
        ),
        "framework": (FrameworkControllerTrainingService, fc_config(root, cluster, taskRoles=[FC_ROLE, PS])),
        "adaptdljob": (AdlTrainingService, adl_config(root, cluster)),
    }


def record_names(cluster: KubernetesEmulator) -> list[tuple[str, str]]:
    """Every name the cluster accepted, and every pod's hostname, as (what, name)."""
    names: list[tuple[str, str]] = []

    def created(rt: Any, obj: dict[str, Any]) -> None:
        names.append((rt.kind, obj["metadata"]["name"]))
        if rt.kind == "Pod" and (obj.get("spec") or {}).get("hostname"):
            names.append(("hostname", obj["spec"]["hostname"]))

    cluster.api.on_created.append(created)
    return names


@pytest.mark.parametrize("kind", ["tfjob", "pytorchjob", "framework", "adaptdljob"])
@pytest.mark.parametrize(("length", "attempt"), [("32", 1), ("40", 0), ("63", 1)])
async def test_a_long_experiment_id_runs_on_every_kind(
    tmp_path: Path, cluster: KubernetesEmulator, kind: str, length: str, attempt: int
) -> None:
    experiment_id = IDS[length]
    assert len(experiment_id) == int(length)
    service_class, config = kinds(tmp_path, cluster)[kind]
    names = record_names(cluster)
    write_trial(tmp_path / "code", "done.py", 'report("FINAL", 0, 1)\n')
    record = '{"parameter_id": 1, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}'
    spec = TrialSpec("Ab3dE", attempt, "python3 done.py", tmp_path / "code", record)
    async with started(service_class, tmp_path, config, experiment_id) as service:
        submitted = await service.submit(spec)
        seen = await poll_until(service, lambda s: "Ab3dE" in s.ended)
    assert seen.ended["Ab3dE"].status == TrialStatus.SUCCEEDED, (seen.ended["Ab3dE"], cluster.errors())
    assert [(m.type, m.data) for m in seen.metrics] == [("FINAL", "1")]
    name = submitted.handle["name"]  # type: ignore[union-attr]
    replicas = {
        "tfjob": [("Service", f"{name}-worker-{i}") for i in (0, 1)],
        "pytorchjob": [("Service", f"{name}-master-0"), ("Service", f"{name}-worker-1")],
        "framework": [("Pod", f"{name}-worker-0"), ("Pod", f"{name}-ps-0")],
        "adaptdljob": [("hostname", f"{name}-0-0")],
    }[kind]
    assert set(replicas) <= set(names), names
    assert all(len(found) <= 63 for what, found in names if what in ("Service", "hostname")), names


async def test_an_experiment_id_no_label_can_hold_is_refused_by_name(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    config = kubeflow_config(tmp_path, cluster, "tf-operator", worker=KF_ROLE)
    with pytest.raises(PlatformError, match=r"kubeflow: experiment id 'x{64}' .*labels every resource.*63"):
        async with started(KubeflowTrainingService, tmp_path, config, "x" * 64):
            pass
