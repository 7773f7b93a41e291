"""Names of trial resources and where this machine mounts the storage (pure functions of the Kubernetes platforms)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.config import K8sAzureStorageConfig, K8sNfsConfig, K8sPvcConfig
from trialfleet.training_services.kubernetes.kubeflow import TFJOB, kubeflow_manifest
from trialfleet.training_services.kubernetes.names import (
    label_value,
    resource_name,
    same_attempt,
    trial_labels,
)
from trialfleet.training_services.kubernetes.storage import (
    find_local_mount,
    local_mount_point,
    parse_mountinfo,
    storage_spec,
)

DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
FC_NAME = re.compile(r"[a-z0-9]{1,63}")


def test_names_keep_nnis_shape_when_nothing_is_lost() -> None:
    assert resource_name("k3j2h1g0", "abcde", 0) == "nni-exp-k3j2h1g0-trial-abcde"
    assert resource_name("k3j2h1g0", "abcde", 2) == "nni-exp-k3j2h1g0-trial-abcde-attempt-2"
    assert resource_name("k3j2h1g0", "abcde", 0, compact=True) == "nniexpk3j2h1g0trialabcde"


@pytest.mark.parametrize("compact", [False, True])
def test_names_are_valid_distinct_per_attempt_and_stable(compact: bool) -> None:
    pattern = FC_NAME if compact else DNS_1035
    ids = [
        ("k3j2h1g0", "Ab3dE"),
        ("k3j2h1g0", "ab3de"),
        ("k3j2h1g0", "AB3DE"),
        ("e" * 40, "T" * 40),
        ("x_y.z", "a.b_c"),
    ]
    names = set()
    for experiment, trial in ids:
        for attempt in (0, 1, 12):
            name = resource_name(experiment, trial, attempt, compact=compact)
            assert pattern.fullmatch(name) and len(name) <= 63, name
            assert name == resource_name(experiment, trial, attempt, compact=compact)
            names.add(name)
    assert len(names) == len(ids) * 3  # trial ids differing only in case still get names of their own


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("room", [0, 9, 10, 14])
def test_names_leave_the_room_the_operator_asks_for(compact: bool, room: int) -> None:
    """``-worker-0`` (9), AdaptDL's ``-99999-999`` (10), ``-worker-99999`` (13): the replica's names fit in 63."""
    for experiment in ("k3j2h1g0", "x" * 32, "imported_from_nni-2026-12-04-resnet50-v2", "E.x" * 21):
        for attempt in (0, 1, 12):
            name = resource_name(experiment, "Ab3dE", attempt, compact=compact, room=room)
            assert len(name) + room <= 63, name
            assert name == resource_name(experiment, "Ab3dE", attempt, compact=compact, room=room)
    assert (
        resource_name("k3j2h1g0", "abcde", 0, room=14) == "nni-exp-k3j2h1g0-trial-abcde"
    )  # readable when it fits
    shortened = resource_name("x" * 32, "abcde", 1, room=9)  # 62 characters before shortening: the experiment
    assert shortened.startswith("nni-exp-" + "x" * 15 + "-trial-abcde-attempt-1-") and len(shortened) == 54
    assert resource_name("x" * 32, "abcde", 1, compact=True, room=9).startswith(
        "nniexp" + "x" * 22 + "trialabcdeattempt1"
    )


def test_labels_take_only_valid_label_values() -> None:
    assert trial_labels("exp1", "Ab3dE", 1) == {
        "app": "nni-kubernetes-trial",
        "expId": "exp1",
        "trialId": "Ab3dE",
        "trialfleet.io/attempt": "1",
    }
    for bad in ("", "a b", "-a", "x" * 64, "ü"):
        with pytest.raises(ValueError):
            label_value("trial id", bad)
    assert same_attempt({**trial_labels("e", "t", 0), "extra": "x"}, "e", "t", 0)
    assert not same_attempt(trial_labels("e", "t", 1), "e", "t", 0)
    assert not same_attempt(None, "e", "t", 0)


def test_old_kubeflow_versions_keep_the_run_policy_in_the_spec() -> None:
    from trialfleet.training_services.kubernetes.cluster import TrialJob
    from trialfleet.training_services.kubernetes.pods import Entrypoint, Replica

    entry = Entrypoint("python3", "/e.py", "/t", "/k.py", "/shim", "worker")
    job = TrialJob("n", {}, {}, {}, entry, {"nfs": {"server": "s", "path": "/"}}, "/tmp/mount", None)
    replica = Replica("worker", "tensorflow", "img", 1, 512, 0)
    old = kubeflow_manifest(TFJOB.at("v1alpha2"), job, {"worker": (1, replica)})
    assert old["apiVersion"] == "kubeflow.org/v1alpha2" and old["spec"]["cleanPodPolicy"] == "Running"
    assert "runPolicy" not in old["spec"]
    current = kubeflow_manifest(TFJOB, job, {"worker": (1, replica)})
    assert (
        current["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
        and "cleanPodPolicy" not in current["spec"]
    )


MOUNTINFO = r"""22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 0:40 / /mnt/nfs\040general rw,relatime - nfs4 10.0.0.5:/exports rw,vers=4.2
31 22 0:41 / /mnt/sub rw,relatime - nfs4 10.0.0.5:/exports/deep/er rw
32 22 0:42 /exports /mnt/bound rw,relatime - nfs4 10.0.0.5:/exports rw
33 22 0:43 / /mnt/other rw,relatime - nfs4 10.0.0.6:/exports rw
34 22 0:44 / /mnt/azure rw,relatime - cifs //NNIStorage.file.core.windows.net/nni-share rw
35 22 0:45 / /mnt/sshfs rw - fuse.sshfs 10.0.0.7:/srv rw
"""


def nfs(server: str, path: str) -> K8sNfsConfig:
    return K8sNfsConfig(server=server, path=path)


@pytest.mark.parametrize(
    ("storage", "found"),
    [
        (nfs("10.0.0.5", "/exports"), "/mnt/nfs general"),
        (nfs("10.0.0.5", "/exports/"), "/mnt/nfs general"),
        (nfs("10.0.0.5", "/exports/nni"), "/mnt/nfs general/nni"),  # a directory of a mounted export
        (nfs("10.0.0.5", "/exports/deep/er/most"), "/mnt/sub/most"),  # the deepest mount that holds it
        (nfs("10.0.0.6", "/exports"), "/mnt/other"),
        (nfs("10.0.0.7", "/srv"), "/mnt/sshfs"),  # any file system that shows the export
        (nfs("10.0.0.9", "/exports"), None),
        (nfs("10.0.0.5", "/elsewhere"), None),
        (
            K8sAzureStorageConfig(
                azure_account="nnistorage", azure_share="nni-share", key_vault_name="v", key_vault_key="k"
            ),
            "/mnt/azure",
        ),
        (
            K8sAzureStorageConfig(
                azure_account="nnistorage", azure_share="other", key_vault_name="v", key_vault_key="k"
            ),
            None,
        ),
    ],
)
def test_the_storage_is_found_in_the_mount_table(
    storage: K8sNfsConfig | K8sAzureStorageConfig, found: str | None
) -> None:
    result = find_local_mount(storage_spec(storage), parse_mountinfo(MOUNTINFO))
    assert result == (Path(found) if found is not None else None)


def test_local_mount_point_given_or_explained(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert local_mount_point("kubeflow", storage_spec(nfs("10.0.0.5", "/exports")), table) == Path(
        "/mnt/nfs general"
    )
    # an export this machine does not mount is mounted at start (integration: test_kubernetes_preparation)
    assert local_mount_point("kubeflow", storage_spec(nfs("10.0.0.9", "/x")), table) is None
    claim = K8sPvcConfig(claim_name="trials", local_mount_point=tmp_path / "missing")
    with pytest.raises(PlatformError, match=r"localMountPoint .*missing .*claim trials.* is not a directory"):
        local_mount_point("frameworkcontroller", storage_spec(claim), table)
    claim = K8sPvcConfig(claim_name="trials", local_mount_point=tmp_path)
    assert local_mount_point("frameworkcontroller", storage_spec(claim), table) == tmp_path
