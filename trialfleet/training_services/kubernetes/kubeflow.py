"""``platform: kubeflow``: every trial attempt is a TFJob (``tf-operator``) or a PyTorchJob (``pytorch-operator``).

Each configured role (``master``, ``worker``, ``ps``) is a replica type of the job, every replica running the
entry point with its role's command. The trial's own replica — the one whose metrics are the trial's — is
``Master`` 0 when there is a master, else ``Worker`` 0 (``PS`` never is). The operator gives each replica its
framework's environment (``TF_CONFIG`` for distributed TFJobs, ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/
``WORLD_SIZE`` for PyTorchJobs) and its index as a pod label, which the downward API hands the entry point.

With ``reuseMode`` (NNI's default) and one replica, trials run one after another in worker jobs (:mod:`.reuse`).

Replicas never restart (``restartPolicy: Never``: trialfleet's retry policy decides, in a fresh attempt) and
the ``runPolicy`` cleans up replicas still running once the job ended (``cleanPodPolicy: Running``, the PS of
a TFJob) while keeping the finished ones, whose exit codes and OOM kills say how a replica ended. No
``backoffLimit``: with ``Never`` nothing restarts to count, and ``backoffLimit: 0`` makes the operator fail the
job before its replica rule and delete every pod at once, that record included.
"""

from __future__ import annotations

from typing import Any

from trialfleet.training_services.kubernetes.client import ResourceKind
from trialfleet.training_services.kubernetes.cluster import TrialJob
from trialfleet.training_services.kubernetes.config import ROLE_NAMES, KubeflowConfig, KubeflowRoleConfig
from trialfleet.training_services.kubernetes.pods import Replica, container, pod_template
from trialfleet.training_services.kubernetes.reuse import ReusableKubernetesService
from trialfleet.training_services.kubernetes.secrets import prepare_secrets
from trialfleet.training_services.kubernetes.states import JobState, kubeflow_state
from trialfleet.training_services.kubernetes.storage import StorageSpec, storage_spec
from trialfleet.training_services.spec import TrialSpec

GROUP = "kubeflow.org"
TFJOB = ResourceKind("TFJob", GROUP, "v1", "tfjobs", "the Kubeflow training operator (tf-operator)")
PYTORCHJOB = ResourceKind(
    "PyTorchJob", GROUP, "v1", "pytorchjobs", "the Kubeflow training operator (pytorch-operator)"
)
REPLICA_TYPES = {"master": "Master", "worker": "Worker", "ps": "PS"}
CONTAINERS = {"TFJob": "tensorflow", "PyTorchJob": "pytorch"}
REPLICA_SPECS = {"TFJob": "tfReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}
#: the pod label of a replica's index, by operator version: the training operator from v1.4; up to v1.3 (and
#: tf-operator / pytorch-operator v1 on kubeflow/common); tf-operator v1alpha2; the standalone pytorch-operator
INDEX_LABELS = (
    "training.kubeflow.org/replica-index",
    "replica-index",
    "tf-replica-index",
    "pytorch-replica-index",
)
#: versions of tf-operator before the training operator kept the run policy's fields in ``spec`` itself
FLAT_POLICY_VERSIONS = ("v1alpha1", "v1alpha2", "v1beta1", "v1beta2")


def kubeflow_manifest(
    kind: ResourceKind, job: TrialJob, replicas: dict[str, tuple[int, Replica]]
) -> dict[str, Any]:
    """The TFJob or PyTorchJob of one trial attempt: ``replicas`` maps role → (replica count, what it runs)."""
    specs = {}
    for role, (count, replica) in replicas.items():
        main = container(replica, job.entrypoint, job.variables, job.mount_path)
        template = pod_template(job.labels, job.annotations, [main], job.volume, replica)
        specs[REPLICA_TYPES[role]] = {"replicas": count, "restartPolicy": "Never", "template": template}
    policy = {"cleanPodPolicy": "Running"}
    spec: dict[str, Any] = dict(policy) if kind.version in FLAT_POLICY_VERSIONS else {"runPolicy": policy}
    spec[REPLICA_SPECS[kind.kind]] = specs
    metadata = {"name": job.name, "labels": job.labels, "annotations": job.annotations}
    return {
        "apiVersion": f"{kind.group}/{kind.version}",
        "kind": kind.kind,
        "metadata": metadata,
        "spec": spec,
    }


class KubeflowTrainingService(ReusableKubernetesService[KubeflowConfig]):
    platform = "kubeflow"
    config_class = KubeflowConfig

    def resource_kind(self) -> ResourceKind:
        kind = TFJOB if self.config.operator == "tf-operator" else PYTORCHJOB
        return kind.at(self.config.api_version)

    def fallback_kind(self) -> ResourceKind | None:
        """NNI's examples name v1alpha2, which current operators no longer serve: they serve v1."""
        return self.kind.at("v1") if self.kind.version != "v1" else None

    def storage_spec(self) -> StorageSpec:
        return storage_spec(self.config.storage)

    def name_room(self) -> int:
        """Room for the operator's Services, ``GenGeneralName``'s ``<job>-<replicatype>-<index>``.

        The training operator names each replica's pod and headless Service with ``GenGeneralName``
        (kubeflow/training-operator pkg/controller.v1/common/util.go, service.go; the same in tf-operator and
        pytorch-operator since v0.2), and a Service name is a DNS-1035 label of at most 63 characters.
        """
        return max(
            len(f"-{REPLICA_TYPES[name].lower()}-{role.replicas - 1}") for name, role in self._roles().items()
        )

    def _roles(self) -> dict[str, KubeflowRoleConfig]:
        """The configured roles, the primary's first: master, else worker."""
        return {name: role for name in ROLE_NAMES if (role := getattr(self.config, name)) is not None}

    def role_commands(self, spec: TrialSpec) -> dict[str, str]:
        return {name: role.command or spec.command for name, role in self._roles().items()}

    def reuse_refusal(self) -> str | None:
        """A worker is one replica: a job of several replicas runs one distributed trial (their ``TF_CONFIG`` or
        ``MASTER_ADDR`` name that job's peers), which one worker running trial after trial cannot give."""
        roles = self._roles()
        replicas = sum(role.replicas for role in roles.values())
        if replicas == 1:
            return None
        shape = ", ".join(f"{name} x{role.replicas}" for name, role in roles.items())
        return f"a job of {replicas} replicas ({shape})"

    def worker_gpus(self) -> int | None:
        return next(iter(self._roles().values())).gpu_number

    async def _prepare_platform(self) -> None:
        self.pull_secrets = await prepare_secrets(
            self.client, self.platform, self.config.storage, self._roles()
        )

    def manifest(self, job: TrialJob) -> dict[str, Any]:
        replicas = {}
        for name, role in self._roles().items():
            replica = Replica(
                role=name,
                container=CONTAINERS[self.kind.kind],
                image=role.docker_image,
                cpu=role.cpu_number,
                memory_mb=role.memory_size,
                gpus=role.gpu_number,
                pull_secrets=self.pull_secrets.get(name, ()),
                index_labels=INDEX_LABELS,
            )
            replicas[name] = (role.replicas, replica)
        return kubeflow_manifest(self.kind, job, replicas)

    def job_state(self, obj: Any) -> JobState:
        return kubeflow_state(obj)
