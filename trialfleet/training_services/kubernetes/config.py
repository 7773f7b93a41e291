"""The Kubernetes platforms' blocks: ``kubeflow``, ``frameworkcontroller`` and ``adl`` (AdaptDL), and their storage."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from trialfleet.config.base import ConfigModel, SizeMB
from trialfleet.config.service import DEFAULT_IMAGE, TrainingServiceConfig


class K8sNfsConfig(ConfigModel):
    storage_type: Literal["nfs"] = "nfs"
    server: str
    path: str


class K8sAzureStorageConfig(ConfigModel):
    storage_type: Literal["azureStorage"] = "azureStorage"
    azure_account: str
    azure_share: str
    key_vault_name: str
    key_vault_key: str


K8sStorageConfig = Annotated[K8sNfsConfig | K8sAzureStorageConfig, Field(discriminator="storage_type")]


class KubeflowRoleConfig(ConfigModel):
    replicas: int = Field(gt=0)
    command: str
    gpu_number: int | None = Field(default=0, ge=0)
    cpu_number: int = Field(gt=0)
    memory_size: SizeMB = Field(gt=0)
    docker_image: str = DEFAULT_IMAGE
    code_directory: str  # required by NNI although reuse mode does not use it


class KubeflowConfig(TrainingServiceConfig):
    platform: Literal["kubeflow"] = "kubeflow"
    trial_command: str = ""  # the roles carry the commands
    operator: Literal["tf-operator", "pytorch-operator"]
    api_version: str
    storage: K8sStorageConfig
    worker: KubeflowRoleConfig | None = None
    ps: KubeflowRoleConfig | None = None
    master: KubeflowRoleConfig | None = None
    reuse_mode: bool = True
    namespace: str = "default"


class FrameworkAttemptCompletionPolicy(ConfigModel):
    min_failed_task_count: int
    min_succeed_task_count: int


class FrameworkControllerRoleConfig(ConfigModel):
    name: str
    docker_image: str = DEFAULT_IMAGE
    task_number: int = Field(gt=0)
    command: str
    gpu_number: int = Field(ge=0)
    cpu_number: int = Field(gt=0)
    memory_size: SizeMB = Field(gt=0)
    framework_attempt_completion_policy: FrameworkAttemptCompletionPolicy


class FrameworkControllerConfig(TrainingServiceConfig):
    platform: Literal["frameworkcontroller"] = "frameworkcontroller"
    trial_command: str = ""  # the task roles carry the commands
    storage: K8sStorageConfig
    service_account_name: str | None = None
    task_roles: list[FrameworkControllerRoleConfig] = Field(min_length=1)
    reuse_mode: bool = True
    namespace: str = "default"


class AdlImagePullSecret(ConfigModel):
    name: str


class AdlNfsConfig(ConfigModel):
    server: str
    path: str
    container_mount_path: str


class AdlCheckpointConfig(ConfigModel):
    storage_class: str
    storage_size: str  # a Kubernetes quantity, e.g. "1Gi"


class AdlConfig(TrainingServiceConfig):
    """AdaptDL: only reachable from legacy v1 configs (NNI never had a v2 schema for it)."""

    platform: Literal["adl"] = "adl"
    image: str
    namespace: str = "default"
    adaptive: bool = False  # a preemptible, elastic job
    image_pull_secrets: list[AdlImagePullSecret] | None = None
    nfs: AdlNfsConfig | None = None
    checkpoint: AdlCheckpointConfig | None = None
    cpu_number: int | None = Field(default=None, gt=0)
    memory_size: str | None = None  # a Kubernetes quantity, e.g. "8Gi"
