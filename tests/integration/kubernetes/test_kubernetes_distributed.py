"""Trials of more than one replica: each replica gets the environment its framework needs, runs in a directory of
its own, and only the trial's replica (master 0, else worker 0; task 0 of the first role; rank 0) reports the
trial's metrics. And AdaptDL's rescale, which restarts every replica, does not end the trial.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from k8s_helpers import (
    FC_ROLE,
    KF_ROLE,
    adl_config,
    fc_config,
    kubeflow_config,
    started,
    trial_host,
    trial_spec,
    write_trial,
)

from tests.emulators.kubernetes import KubernetesEmulator
from tests.emulators.kubernetes.kubeflow import INDEX_LABELS
from trialfleet.status import TrialStatus
from trialfleet.testing import Seen, poll_until
from trialfleet.training_services.base import TrainingService
from trialfleet.training_services.kubernetes.service import (
    AdlTrainingService,
    FrameworkControllerTrainingService,
    KubeflowTrainingService,
)

VARIABLES = [
    *("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TF_CONFIG"),
    *("FC_FRAMEWORK_NAME", "FC_TASKROLE_NAME", "FC_TASK_INDEX", "FB_WORKER_IPS", "FB_WORKER_ADDRESSES"),
    *("FB_PS_IPS", "FB_PS_ADDRESSES", "FB_WORKER_PORT", "FB_PS_PORT"),
    *("ADAPTDL_JOB_ID", "ADAPTDL_REPLICA_RANK", "ADAPTDL_NUM_REPLICAS", "ADAPTDL_CHECKPOINT_PATH"),
    *("ADAPTDL_SHARE_PATH", "ADAPTDL_TENSORBOARD_LOGDIR", "NNI_TRIAL_JOB_ID", "NNI_SYS_DIR", "NNI_PLATFORM"),
]
ENV_TRIAL = f"""
env = {{name: os.environ.get(name) for name in {VARIABLES!r}}}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "env.json"), "w") as f:
    json.dump(env, f)
primary = os.path.basename(SYS_DIR) == os.environ["NNI_TRIAL_JOB_ID"]
if primary:  # the job ends with its primary replica: the others must have written theirs by then
    import glob
    while len(glob.glob(os.path.join(SYS_DIR, "replicas", "*", "env.json"))) < int(sys.argv[1]) - 1:
        time.sleep(0.02)
report("FINAL", 0, 0 if primary else 1)
"""


async def run_trial(service: TrainingService, root: Path, replicas: int) -> tuple[Seen, Any]:
    write_trial(root / "code", "env.py", ENV_TRIAL)
    submitted = await service.submit(trial_spec("dist", f"python3 env.py {replicas}", root / "code"))
    seen = await poll_until(service, lambda s: "dist" in s.ended)
    assert seen.ended["dist"].status == TrialStatus.SUCCEEDED, seen.ended["dist"]
    metrics_file = root / "nfs" / "nni" / "k8s" / "trials" / "dist" / ".nni" / "metrics"
    assert [(m.type, m.data) for m in seen.metrics] == [("FINAL", "0")], (  # the trial's replica's only
        f"problems {seen.problems}; {metrics_file} holds "
        f"{metrics_file.read_bytes() if metrics_file.exists() else 'nothing (missing)'!r}"
    )
    return seen, submitted.handle  # type: ignore[union-attr]


def environments(root: Path) -> dict[str, dict[str, str | None]]:
    """Each replica's variables, by its directory: "dist" (the trial's replica) and replicas/<role>-<index>."""
    trial_dir = root / "nfs" / "nni" / "k8s" / "trials" / "dist"
    found = {"dist": json.loads((trial_dir / "env.json").read_text())}
    for replica in sorted((trial_dir / "replicas").glob("*")) if (trial_dir / "replicas").exists() else []:
        found[replica.name] = json.loads((replica / "env.json").read_text())
    return found


async def test_a_pytorchjob_of_a_master_and_two_workers_gets_its_rendezvous(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    roles = {"master": KF_ROLE, "worker": {**KF_ROLE, "replicas": 2}}
    config = kubeflow_config(tmp_path, cluster, "pytorch-operator", **roles)
    async with started(KubeflowTrainingService, tmp_path, config) as service:
        _, handle = await run_trial(service, tmp_path, 3)
    env = environments(tmp_path)
    assert sorted(env) == ["dist", "worker-0", "worker-1"]
    master = f"{handle['name']}-master-0"
    ranks = {
        replica: (e["RANK"], e["WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"])
        for replica, e in env.items()
    }
    assert ranks == {
        "dist": ("0", "3", master, "23456"),
        "worker-0": ("1", "3", master, "23456"),
        "worker-1": ("2", "3", master, "23456"),
    }
    assert all(e["NNI_TRIAL_JOB_ID"] == "dist" and e["NNI_PLATFORM"] == "kubeflow" for e in env.values())


@pytest.mark.parametrize("operator_version", sorted(INDEX_LABELS))
async def test_replicas_get_directories_of_their_own_whatever_label_the_operator_sets(
    tmp_path: Path, cluster: KubernetesEmulator, operator_version: str
) -> None:
    """Operators before the training operator v1.4 label a replica's index ``replica-index``,
    ``tf-replica-index`` or ``pytorch-replica-index``: each replica must still find its own index."""
    cluster.operators["kubeflow"].controller.index_label = INDEX_LABELS[operator_version]
    config = kubeflow_config(tmp_path, cluster, "tf-operator", worker={**KF_ROLE, "replicas": 2})
    async with started(KubeflowTrainingService, tmp_path, config) as service:
        await run_trial(service, tmp_path, 2)
    assert sorted(environments(tmp_path)) == ["dist", "worker-1"]


async def test_a_tfjob_of_two_workers_gets_its_tf_config(tmp_path: Path, cluster: KubernetesEmulator) -> None:
    config = kubeflow_config(tmp_path, cluster, "tf-operator", worker={**KF_ROLE, "replicas": 2})
    async with started(KubeflowTrainingService, tmp_path, config) as service:
        _, handle = await run_trial(service, tmp_path, 2)
    env = environments(tmp_path)
    assert sorted(env) == ["dist", "worker-1"]
    configs = {replica: json.loads(e["TF_CONFIG"] or "null") for replica, e in env.items()}
    workers = [f"{handle['name']}-worker-{i}.default.svc:2222" for i in range(2)]
    for replica, index in (("dist", 0), ("worker-1", 1)):
        assert configs[replica]["cluster"] == {"worker": workers}
        assert configs[replica]["task"] == {"type": "worker", "index": index}


async def test_a_framework_of_two_tasks_gets_fc_and_barrier_variables(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    config = fc_config(tmp_path, cluster, taskRoles=[{**FC_ROLE, "taskNumber": 2}])
    async with started(FrameworkControllerTrainingService, tmp_path, config) as service:
        _, handle = await run_trial(service, tmp_path, 2)
    env = environments(tmp_path)
    assert sorted(env) == ["dist", "worker-1"]
    for replica, index in (("dist", "0"), ("worker-1", "1")):
        assert (env[replica]["FC_FRAMEWORK_NAME"], env[replica]["FC_TASKROLE_NAME"]) == (
            handle["name"],
            "worker",
        )
        assert env[replica]["FC_TASK_INDEX"] == index
        ips = (env[replica]["FB_WORKER_IPS"] or "").split(",")
        assert len(ips) == 2 and all(ips)
        assert env[replica]["FB_WORKER_ADDRESSES"] == ",".join(f"{ip}:4000" for ip in ips)


async def test_a_framework_of_two_task_roles_gives_every_role_s_address_to_every_task(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    """The barrier builds each role's FB_<ROLE>_ADDRESSES from FB_<ROLE>_PORT, so every container needs every
    role's port: a worker must reach the ps at ip:port, not at ``ip:``."""
    ps = {**FC_ROLE, "name": "ps"}
    ps["frameworkAttemptCompletionPolicy"] = {"minFailedTaskCount": 1, "minSucceedTaskCount": -1}
    config = fc_config(tmp_path, cluster, taskRoles=[FC_ROLE, ps])
    async with started(FrameworkControllerTrainingService, tmp_path, config) as service:
        await run_trial(service, tmp_path, 2)
    env = environments(tmp_path)
    assert sorted(env) == ["dist", "ps-0"]
    for replica in env.values():
        assert (replica["FB_WORKER_PORT"], replica["FB_PS_PORT"]) == ("4000", "4001")
        for role, port in (("WORKER", 4000), ("PS", 4001)):
            ip = replica[f"FB_{role}_IPS"]
            assert ip and replica[f"FB_{role}_ADDRESSES"] == f"{ip}:{port}", replica


async def test_an_adaptdljob_gets_adaptdl_variables_and_its_checkpoint_claim(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    async with started(AdlTrainingService, tmp_path, adl_config(tmp_path, cluster)) as service:
        _, handle = await run_trial(service, tmp_path, 1)
    env = environments(tmp_path)["dist"]
    assert env["ADAPTDL_JOB_ID"] == f"default/{handle['name']}"
    assert (env["ADAPTDL_REPLICA_RANK"], env["ADAPTDL_NUM_REPLICAS"]) == ("0", "1")
    assert (env["ADAPTDL_CHECKPOINT_PATH"], env["ADAPTDL_SHARE_PATH"]) == (
        "/adaptdl/checkpoint",
        "/adaptdl/share",
    )
    assert env["ADAPTDL_TENSORBOARD_LOGDIR"] == "/tmp/mount/nni/k8s/trials/dist/tensorboard"


RESCALED = """
restarts = int(os.environ["ADAPTDL_NUM_RESTARTS"])
report("PERIODICAL", restarts, restarts)
with open(os.path.join(os.environ["ADAPTDL_CHECKPOINT_PATH"], "run-%d" % restarts), "w") as f:
    f.write(os.environ["HOSTNAME"])
if restarts == 0:
    touch("running")
    time.sleep(600)  # until AdaptDL stops this replica to rescale the job
report("FINAL", 0, 7)
"""


async def test_an_adaptdl_rescale_restarts_the_trial_without_ending_it(
    tmp_path: Path, cluster: KubernetesEmulator
) -> None:
    control = trial_host(tmp_path)
    write_trial(tmp_path / "code", "rescaled.py", RESCALED)
    async with started(AdlTrainingService, tmp_path, adl_config(tmp_path, cluster, adaptive=True)) as service:
        submitted = await service.submit(
            trial_spec("scale", f"python3 rescaled.py {control.seen_by_trials}", tmp_path / "code")
        )
        await control.wait_for("running")
        cluster.reallocate("default", submitted.handle["name"], ["node-2"])  # type: ignore[union-attr]
        seen = await poll_until(service, lambda s: "scale" in s.ended)
    assert (seen.ended["scale"].status, seen.ended["scale"].exit_code) == (TrialStatus.SUCCEEDED, 0)
    assert [(m.type, m.sequence, m.data) for m in seen.metrics] == [
        ("PERIODICAL", 0, "0"),
        ("PERIODICAL", 1, "1"),
        ("FINAL", 0, "7"),
    ]
    claims = cluster.directory / "pvc" / "default" / submitted.handle["name"] / "adaptdl" / "checkpoint"  # type: ignore[union-attr]
    assert sorted(path.name for path in claims.iterdir()) == ["run-0", "run-1"]
