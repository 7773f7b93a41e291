"""Training-service blocks of cluster platforms: accepted by the schema (so NNI configs load and convert),
refused by the platform registry at start until a service implements them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from trialfleet.config.base import (
    ConfigModel,
    ConfigPath,
    JsonMapping,
    KeyPath,
    Secret,
    SizeMB,
    existing,
    raise_problems,
)
from trialfleet.config.training_services import TrainingServiceBase

DEFAULT_IMAGE = "msranni/nni:latest"


class OpenpaiConfig(TrainingServiceBase):
    platform: Literal["openpai"] = "openpai"
    host: str
    username: str
    token: Secret
    trial_cpu_number: int = Field(gt=0)
    trial_memory_size: SizeMB = Field(gt=0)
    storage_config_name: str
    docker_image: str = DEFAULT_IMAGE
    virtual_cluster: str | None = None  # None: the cluster's default virtual cluster
    local_storage_mount_point: ConfigPath
    container_storage_mount_point: str
    reuse_mode: bool = True
    openpai_config: JsonMapping | None = None
    openpai_config_file: ConfigPath | None = None

    @field_validator("host")
    @classmethod
    def _add_scheme(cls, host: str) -> str:
        return host if "://" in host else f"https://{host}"

    _check_mount = field_validator("local_storage_mount_point")(
        existing("directory", "local storage mount point")
    )
    _check_config_file = field_validator("openpai_config_file")(existing("file", "OpenPAI config file"))

    @model_validator(mode="after")
    def _check_openpai(self) -> OpenpaiConfig:
        problems: list[tuple[KeyPath, str]] = []
        if self.trial_gpu_number is None:
            problems.append(
                (("trialGpuNumber",), "required field is missing (OpenPAI jobs need a GPU count)")
            )
        if self.openpai_config is not None and self.openpai_config_file is not None:
            problems.append(
                (("openpaiConfigFile",), "set either openpaiConfig or openpaiConfigFile, not both")
            )
        raise_problems(problems)
        return self


class AmlConfig(TrainingServiceBase):
    platform: Literal["aml"] = "aml"
    subscription_id: str
    resource_group: str
    workspace_name: str
    compute_target: str
    docker_image: str = DEFAULT_IMAGE
    max_trial_number_per_gpu: int = Field(default=1, gt=0)


class DlcConfig(TrainingServiceBase):
    """Alibaba PAI-DLC."""

    platform: Literal["dlc"] = "dlc"
    type: str = "Worker"
    image: str
    job_type: Literal["TFJob", "PyTorchJob"] = "TFJob"
    pod_count: int = Field(gt=0)
    ecs_spec: str
    region: str
    workspace_id: str
    nas_data_source_id: str
    oss_data_source_id: str | None = None
    access_key_id: str
    access_key_secret: Secret
    local_storage_mount_point: str
    container_storage_mount_point: str


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


class KubeflowConfig(TrainingServiceBase):
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


class FrameworkControllerConfig(TrainingServiceBase):
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


class AdlConfig(TrainingServiceBase):
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


class DltsConfig(TrainingServiceBase):
    """Microsoft DLTS, removed from NNI before 3.0."""

    platform: Literal["dlts"] = "dlts"
    dashboard: str
    image: str
    cluster: str | None = None
    team: str | None = None
    email: str | None = None
    password: Secret | None = None
