"""``platform: adl``: every trial attempt is an AdaptDLJob (``adaptdl.petuum.com/v1``), elastic when ``adaptive``.

AdaptDL's scheduler decides how many replicas a job gets and may change it while the job runs: it then stops
every replica (``Stopping``, SIGTERM) and starts a new group (``Pending`` → ``Starting`` → ``Running``). So the
entry point lets replicas run again in their directories (``restartable``), and a trial whose keeper recorded a
cancel that trialfleet did not send is not over while its job is not. Replica 0 (``ADAPTDL_REPLICA_RANK``) is
the trial's; a canceled replica exits 143, which a preemptible job takes as a preemption.

As NNI did, each trial gets a checkpoint claim named like its job (``checkpoint.storageClass``,
``checkpoint.storageSize``), owned by the job, mounted at ``/adaptdl/checkpoint`` and ``/adaptdl/share``
(``ADAPTDL_CHECKPOINT_PATH``, ``ADAPTDL_SHARE_PATH``); ``ADAPTDL_TENSORBOARD_LOGDIR`` is the trial directory's
``tensorboard/`` (NNI ran a TensorBoard deployment per experiment; trialfleet does not). The trial directories are
on ``nfs``, which the manager mounts too: without it the trials could only report through NNI's HTTP channel,
which trialfleet does not offer for this platform yet.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.client import ResourceKind
from trialfleet.training_services.kubernetes.cluster import KubernetesTrainingService, TrialJob
from trialfleet.training_services.kubernetes.config import AdlCheckpointConfig, AdlConfig
from trialfleet.training_services.kubernetes.pods import Entrypoint, Replica, container, pod_template
from trialfleet.training_services.kubernetes.states import JobState, adaptdl_state
from trialfleet.training_services.kubernetes.storage import StorageSpec, adl_storage_spec
from trialfleet.training_services.spec import TrialSpec

ADAPTDLJOB = ResourceKind(
    "AdaptDLJob", "adaptdl.petuum.com", "v1", "adaptdljobs", "AdaptDL (its scheduler, adaptdl-sched)"
)
ROLE = "main"  # NNI's container name
CLAIM_VOLUME = "adaptdl-pvc"
CHECKPOINT_PATH, SHARE_PATH = "/adaptdl/checkpoint", "/adaptdl/share"
#: adaptdl-sched sets each pod's hostname to ``<job>-<group>-<rank>`` (petuum/adaptdl
#: sched/adaptdl_sched/controller.py, ``_create_pod``), a DNS-1123 label of at most 63 characters; the group
#: counts the job's restarts. Room for 99999 restarts and 1000 replicas.
HOSTNAME_ROOM = len("-99999-999")


def adaptdl_manifest(job: TrialJob, replica: Replica, preemptible: bool) -> dict[str, Any]:
    assert isinstance(job.entrypoint, Entrypoint)  # AdaptDL has no reuse mode: every job runs a trial
    variables = {
        **job.variables,
        "ADAPTDL_CHECKPOINT_PATH": CHECKPOINT_PATH,
        "ADAPTDL_SHARE_PATH": SHARE_PATH,
        "ADAPTDL_TENSORBOARD_LOGDIR": posixpath.join(job.entrypoint.trial_dir, "tensorboard"),
    }
    main = container(replica, job.entrypoint, variables, job.mount_path)
    main["volumeMounts"] += [
        {"name": CLAIM_VOLUME, "mountPath": CHECKPOINT_PATH, "subPath": "adaptdl/checkpoint"},
        {"name": CLAIM_VOLUME, "mountPath": SHARE_PATH, "subPath": "adaptdl/share"},
    ]
    claim = {"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": job.name}}
    template = pod_template(job.labels, job.annotations, [main], job.volume, replica, extra_volumes=[claim])
    metadata = {"name": job.name, "labels": job.labels, "annotations": job.annotations}
    spec = {"preemptible": preemptible, "template": template}
    kind = ADAPTDLJOB
    return {
        "apiVersion": f"{kind.group}/{kind.version}",
        "kind": kind.kind,
        "metadata": metadata,
        "spec": spec,
    }


def checkpoint_claim(job: Mapping[str, Any], checkpoint: AdlCheckpointConfig) -> dict[str, Any]:
    """The job's checkpoint claim, owned by it (deleted with it)."""
    meta = job["metadata"]
    owner = {
        "apiVersion": f"{ADAPTDLJOB.group}/{ADAPTDLJOB.version}",
        "kind": ADAPTDLJOB.kind,
        "name": meta["name"],
        "uid": meta["uid"],
    }
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": checkpoint.storage_size}},
    }
    if checkpoint.storage_class is not None:
        spec["storageClassName"] = checkpoint.storage_class
    metadata = {"name": meta["name"], "labels": dict(meta.get("labels") or {}), "ownerReferences": [owner]}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


class AdlTrainingService(KubernetesTrainingService[AdlConfig]):
    platform = "adl"
    config_class = AdlConfig
    restartable = True
    tolerates_disruptions = True  # AdaptDL restarts a job whose replica was evicted or lost

    def resource_kind(self) -> ResourceKind:
        return ADAPTDLJOB

    def name_room(self) -> int:
        return HOSTNAME_ROOM

    def storage_spec(self) -> StorageSpec:
        if self.config.nfs is None:
            raise PlatformError(
                "adl: trial.nfs is required: the trials keep their files on that export, which the manager "
                "mounts too (NNI's HTTP log channel is not available for this platform)"
            )
        return adl_storage_spec(self.config.nfs)

    def role_commands(self, spec: TrialSpec) -> dict[str, str]:
        return {ROLE: spec.command}

    def manifest(self, job: TrialJob) -> dict[str, Any]:
        config = self.config
        replica = Replica(
            role=ROLE,
            container=ROLE,
            image=config.image,
            cpu=config.cpu_number if config.cpu_number is not None else 1,
            memory_mb=None,
            memory=config.memory_size or "1Gi",
            gpus=job.gpu_number,
            pull_secrets=tuple(secret.name for secret in config.image_pull_secrets or ()),
            index_variable="ADAPTDL_REPLICA_RANK",
        )
        return adaptdl_manifest(job, replica, config.adaptive)

    async def _after_create(self, created: Mapping[str, Any], job: TrialJob) -> None:
        checkpoint = self.config.checkpoint or AdlCheckpointConfig()
        await self.client.create_claim(checkpoint_claim(created, checkpoint))

    def job_state(self, obj: Any) -> JobState:
        return adaptdl_state(obj)
