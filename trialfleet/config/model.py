"""Every config model under one import (``trialfleet.training_services`` imports from here)."""

from __future__ import annotations

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.cluster_services import (
    AdlConfig,
    AmlConfig,
    DlcConfig,
    DltsConfig,
    FrameworkControllerConfig,
    FrameworkControllerRoleConfig,
    K8sAzureStorageConfig,
    K8sNfsConfig,
    K8sStorageConfig,
    KubeflowConfig,
    KubeflowRoleConfig,
    OpenpaiConfig,
)
from trialfleet.config.experiment import (
    PLATFORM_CLASSES,
    SHORTCUT_FIELDS,
    ExperimentConfig,
    TrainingServiceConfig,
)
from trialfleet.config.shared_storage import AzureBlobConfig, NfsConfig, SharedStorageConfig
from trialfleet.config.training_services import (
    LocalConfig,
    RemoteConfig,
    RemoteMachineConfig,
    SlurmConfig,
    TrainingServiceBase,
)

__all__ = [
    "PLATFORM_CLASSES",
    "SHORTCUT_FIELDS",
    "AdlConfig",
    "AlgorithmConfig",
    "AmlConfig",
    "AzureBlobConfig",
    "DlcConfig",
    "DltsConfig",
    "ExperimentConfig",
    "FrameworkControllerConfig",
    "FrameworkControllerRoleConfig",
    "K8sAzureStorageConfig",
    "K8sNfsConfig",
    "K8sStorageConfig",
    "KubeflowConfig",
    "KubeflowRoleConfig",
    "LocalConfig",
    "NfsConfig",
    "OpenpaiConfig",
    "RemoteConfig",
    "RemoteMachineConfig",
    "SharedStorageConfig",
    "SlurmConfig",
    "TrainingServiceBase",
    "TrainingServiceConfig",
]
