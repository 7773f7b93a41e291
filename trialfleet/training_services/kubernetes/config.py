"""The Kubernetes platforms' blocks: ``kubeflow``, ``frameworkcontroller`` and ``adl`` (AdaptDL), and their storage.

NNI's keys, v2 and v1 (converted), plus what trialfleet needs to reach the storage from the manager: NNI mounted
the NFS export on the manager itself (``sudo mount``); trialfleet requires it mounted already and finds it in
the mount table, or takes its place from ``localMountPoint`` (see docs/kubernetes.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, ClassVar, Literal

from pydantic import Field, ValidationInfo, model_validator

from trialfleet.config.base import (
    ConfigModel,
    ConfigPath,
    Duration,
    KeyPath,
    SizeMB,
    build_settings,
    raise_problems,
)
from trialfleet.config.service import (
    DEFAULT_IMAGE,
    MANAGER_IP_UNUSED,
    MAX_TRIALS_PER_GPU,
    TrainingServiceConfig,
)

#: FrameworkController's CRD: task role names (and Framework names) match this
FC_NAME = re.compile(r"[a-z0-9]{1,63}")
_LOCAL_MOUNT = "where this machine mounts the storage; found in the mount table when unset"
_ROLE_CODE_DIR = "trials run trialCodeDirectory, copied to the storage once"


def _operator_keys(trial_gpu_number: str) -> dict[str, str]:
    """The keys an operator's platform (Kubeflow, FrameworkController) accepts and does not act on, and why."""
    return {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " on the storage",
        "trial_gpu_number": trial_gpu_number,
    }


class K8sNfsConfig(ConfigModel):
    storage_type: Literal["nfs"] = "nfs"
    """`nfs`."""
    server: str
    """The NFS server."""
    path: str
    """The exported directory."""
    local_mount_point: ConfigPath | None = None  # trialfleet: the export's mount point on this machine
    """Where this machine mounts the export; found in the mount table when unset."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"local_mount_point"})


class K8sAzureStorageConfig(ConfigModel):
    storage_type: Literal["azureStorage"] = "azureStorage"
    """`azureStorage`."""
    azure_account: str
    """The storage account."""
    azure_share: str
    """The Azure file share."""
    key_vault_name: str
    """The Key Vault holding the account key."""
    key_vault_key: str
    """The Key Vault secret holding the account key."""
    local_mount_point: ConfigPath | None = None  # trialfleet: the share's mount point on this machine
    """Where this machine mounts the share; found in the mount table when unset."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"local_mount_point"})


class K8sPvcConfig(ConfigModel):
    """trialfleet: a PersistentVolumeClaim of the namespace, ReadWriteMany, that this machine mounts too."""

    nni_model: ClassVar[bool] = False

    storage_type: Literal["pvc"] = "pvc"
    """`pvc`."""
    claim_name: str
    """A PersistentVolumeClaim of the namespace (ReadWriteMany)."""
    local_mount_point: ConfigPath  # a claim's volume cannot be found in the mount table: name it
    """Where this machine mounts the claim's volume."""


K8sStorageConfig = Annotated[
    K8sNfsConfig | K8sAzureStorageConfig | K8sPvcConfig, Field(discriminator="storage_type")
]


class ClusterAccessConfig(ConfigModel):
    """How the manager reaches the API server: the official client's rules unless a kubeconfig is named."""

    kubeconfig: ConfigPath | None = None  # None: $KUBECONFIG, ~/.kube/config, else the in-cluster account
    """A kubeconfig file; unset: `$KUBECONFIG`, `~/.kube/config`, else the in-cluster service account."""
    kube_context: str | None = None  # a context of the kubeconfig other than its current one
    """A context of the kubeconfig other than its current one."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"kubeconfig", "kube_context"})


class K8sReuseConfig(ConfigModel):
    """Reuse mode on Kubeflow and FrameworkController (NNI 3.0's v2 default there; docs/reuse.md)."""

    reuse_mode: bool = True  # NNI's default
    """Run trials in long-lived worker jobs, trial after trial (docs/reuse.md); acted on for a job of one pod (one
    role of one replica), else every trial attempt is a custom resource of its own and the log says why."""
    worker_idle_timeout: Duration = Field(default=60, gt=0)
    """With `reuseMode`: how long a worker job with no trial is kept before it is released (e.g. `5m`)."""
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)
    """With `reuseMode` and a role asking for GPUs: how many trials one worker runs at once, sharing its GPUs
    (NNI's environment service read it, its schema did not list it)."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"worker_idle_timeout", "max_trial_number_per_gpu"})


class K8sRoleConfig(ConfigModel):
    command: str | None = None  # None or "": the experiment's trialCommand
    """The role's command; unset or empty: the experiment's `trialCommand`."""
    gpu_number: int | None = Field(default=0, ge=0)
    """GPUs each pod of the role asks for."""
    cpu_number: float = Field(gt=0)
    """CPUs each pod asks for."""
    memory_size: SizeMB = Field(gt=0)
    """Memory each pod asks for."""
    docker_image: str = DEFAULT_IMAGE
    """The pods' image."""
    private_registry_auth_path: ConfigPath | None = None  # a docker config.json: becomes an image pull secret
    """A docker `config.json` with registry credentials; it becomes an image pull secret."""


class KubeflowRoleConfig(K8sRoleConfig):
    replicas: int = Field(gt=0)
    """Pods of the role."""
    code_directory: str | None = None  # required by NNI, used by neither NNI's reuse mode nor trialfleet
    """NNI's per-role code directory."""

    not_acted_on: ClassVar[dict[str, str]] = {"code_directory": _ROLE_CODE_DIR}


ROLE_NAMES = ("master", "worker", "ps")  # Kubeflow roles, in the order their replicas are named


class KubeflowConfig(TrainingServiceConfig, ClusterAccessConfig, K8sReuseConfig):
    platform: Literal["kubeflow"] = "kubeflow"
    """`kubeflow`."""
    trial_command: str = ""  # the roles carry the commands
    """The command of roles that set none."""
    operator: Literal["tf-operator", "pytorch-operator"]
    """`tf-operator` (roles `worker`, `ps`, `master`) or `pytorch-operator` (`master`, exactly one replica,
    and `worker`)."""
    api_version: str
    """The operator's API version (e.g. `v1`); checked against the cluster at start."""
    storage: K8sStorageConfig
    """Where trial directories live, mounted by the pods and by this machine."""
    worker: KubeflowRoleConfig | None = None
    """The worker role."""
    ps: KubeflowRoleConfig | None = None
    """The parameter-server role (tf-operator)."""
    master: KubeflowRoleConfig | None = None
    """The master role."""
    namespace: str = "default"
    """The namespace of the custom resources."""

    not_acted_on: ClassVar[dict[str, str]] = _operator_keys("each role's gpuNumber is what its pods ask for")

    @model_validator(mode="after")
    def _check_roles(self) -> KubeflowConfig:
        problems: list[tuple[KeyPath, str]] = []
        if self.operator == "pytorch-operator":
            if self.ps is not None:
                problems.append((("ps",), "pytorch-operator has no ps role (master and worker)"))
            if self.master is not None and self.master.replicas != 1:
                problems.append((("master", "replicas"), "a PyTorchJob has exactly one master"))
            if self.master is None and self.worker is None:
                problems.append((("master",), "pytorch-operator needs a master (or a worker) role"))
        elif self.worker is None and self.master is None:
            problems.append((("worker",), "tf-operator needs a worker (or a master) role"))
        problems += _commands(self.trial_command, [((name,), getattr(self, name)) for name in ROLE_NAMES])
        raise_problems(problems)
        return self

    @model_validator(mode="after")
    def _warn_of_a_version_operators_no_longer_serve(self, info: ValidationInfo) -> KubeflowConfig:
        # said when the config is loaded, not only in manager.log when the cluster is asked
        if self.api_version != "v1":
            build_settings(info).warnings.append(
                f"kubeflow apiVersion {self.api_version}: current Kubeflow operators serve only v1; trialfleet "
                f"uses v1 when the cluster does not serve {self.api_version} (set apiVersion: v1 to say so)"
            )
        return self


class FrameworkAttemptCompletionPolicy(ConfigModel):
    min_failed_task_count: int = Field(ge=-1)
    """Failed tasks that fail the attempt (FrameworkController's `minFailedTaskCount`; -1: none does)."""
    min_succeed_task_count: int = Field(ge=-1)
    """Succeeded tasks that end the attempt successfully (`minSucceededTaskCount`; -1: none does)."""


class FrameworkControllerRoleConfig(K8sRoleConfig):
    name: str
    """The task role's name (1 to 63 lowercase letters and digits)."""
    task_number: int = Field(gt=0, le=10000)
    """Tasks (pods) of the role."""
    gpu_number: int | None = Field(ge=0)
    """GPUs each task asks for."""
    framework_attempt_completion_policy: FrameworkAttemptCompletionPolicy
    """When the role's tasks end the attempt."""


class FrameworkControllerConfig(TrainingServiceConfig, ClusterAccessConfig, K8sReuseConfig):
    platform: Literal["frameworkcontroller"] = "frameworkcontroller"
    """`frameworkcontroller`."""
    trial_command: str = ""  # the task roles carry the commands
    """The command of task roles that set none."""
    storage: K8sStorageConfig
    """Where trial directories live, mounted by the pods and by this machine."""
    service_account_name: str | None = None
    """The pods' service account."""
    task_roles: list[FrameworkControllerRoleConfig] = Field(min_length=1)
    """The Framework's task roles."""
    namespace: str = "default"
    """The namespace of the Frameworks."""

    not_acted_on: ClassVar[dict[str, str]] = _operator_keys("each task role's gpuNumber is what its pods ask for")

    @model_validator(mode="after")
    def _check_roles(self) -> FrameworkControllerConfig:
        problems: list[tuple[KeyPath, str]] = []
        seen: set[str] = set()
        for index, role in enumerate(self.task_roles):
            if not FC_NAME.fullmatch(role.name):
                message = "FrameworkController takes task role names of 1 to 63 lowercase letters and digits"
                problems.append((("taskRoles", index, "name"), f"{message}, got {role.name!r}"))
            elif role.name in seen:
                problems.append((("taskRoles", index, "name"), f"task role {role.name!r} is given twice"))
            seen.add(role.name)
        roles: list[tuple[KeyPath, K8sRoleConfig | None]] = [
            (("taskRoles", index), role) for index, role in enumerate(self.task_roles)
        ]
        problems += _commands(self.trial_command, roles)
        raise_problems(problems)
        return self


def _commands(
    trial_command: str, roles: Sequence[tuple[KeyPath, K8sRoleConfig | None]]
) -> list[tuple[KeyPath, str]]:
    """A role without a command runs trialCommand, so one of them must be there."""
    return [
        ((*where, "command"), "required when trialCommand is not set")
        for where, role in roles
        if role is not None and not role.command and not trial_command
    ]


class AdlImagePullSecret(ConfigModel):
    name: str
    """A secret of the namespace."""


class AdlNfsConfig(ConfigModel):
    server: str
    """The NFS server."""
    path: str
    """The exported directory."""
    container_mount_path: str
    """Where pods mount it (absolute)."""
    local_mount_point: ConfigPath | None = None  # trialfleet: the export's mount point on this machine
    """Where this machine mounts the export; found in the mount table when unset."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"local_mount_point"})


class AdlCheckpointConfig(ConfigModel):
    storage_class: str | None = None  # None: the cluster's default StorageClass
    """The checkpoint volume's StorageClass; unset: the cluster's default."""
    storage_size: str = "1Gi"  # a Kubernetes quantity
    """Its size, a Kubernetes quantity."""


class AdlConfig(TrainingServiceConfig, ClusterAccessConfig):
    """AdaptDL: only reachable from legacy v1 configs (NNI never had a v2 schema for it)."""

    platform: Literal["adl"] = "adl"
    """`adl` (AdaptDL, from legacy v1 configs)."""
    image: str
    """The pods' image."""
    namespace: str = "default"
    """The namespace of the AdaptDLJobs."""
    adaptive: bool = False  # a preemptible, elastic job
    """A preemptible, elastic job."""
    image_pull_secrets: list[AdlImagePullSecret] | None = None
    """Secrets for pulling the image."""
    nfs: AdlNfsConfig | None = None
    """The NFS export holding trial directories."""
    checkpoint: AdlCheckpointConfig | None = None
    """A volume for AdaptDL's checkpoints."""
    cpu_number: float | None = Field(default=None, gt=0)
    """CPUs each pod asks for."""
    memory_size: str | None = None  # a Kubernetes quantity, e.g. "8Gi"
    """Memory each pod asks for, a Kubernetes quantity (`8Gi`)."""

    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " on the NFS export",
    }

    @model_validator(mode="after")
    def _check_mount_path(self) -> AdlConfig:
        if self.nfs is not None and not self.nfs.container_mount_path.startswith("/"):
            raise_problems([(("nfs", "containerMountPath"), "must be an absolute path in the container")])
        return self
