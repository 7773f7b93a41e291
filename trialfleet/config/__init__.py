"""The experiment config: NNI's v2 schema (and legacy v1, converted), loaded with errors that name the file,
the key path and what was expected. Every NNI config class name is exported here."""

from __future__ import annotations

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.convert_v1 import convert_v1_to_v2
from trialfleet.config.experiment import ExperimentConfig, TrainingServiceConfig
from trialfleet.config.loader import LoadedConfig, load_config
from trialfleet.config.model import (
    AdlConfig,
    AmlConfig,
    AzureBlobConfig,
    DlcConfig,
    DltsConfig,
    FrameworkControllerConfig,
    FrameworkControllerRoleConfig,
    K8sAzureStorageConfig,
    K8sNfsConfig,
    K8sStorageConfig,
    KubeflowConfig,
    KubeflowRoleConfig,
    NfsConfig,
    OpenpaiConfig,
    SharedStorageConfig,
)
from trialfleet.config.training_services import LocalConfig, RemoteConfig, RemoteMachineConfig, SlurmConfig
from trialfleet.config.units import parse_size, parse_time

__all__ = [
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
    "LoadedConfig",
    "LocalConfig",
    "NfsConfig",
    "OpenpaiConfig",
    "RemoteConfig",
    "RemoteMachineConfig",
    "SharedStorageConfig",
    "SlurmConfig",
    "TrainingServiceConfig",
    "convert_v1_to_v2",
    "load_config",
    "parse_size",
    "parse_time",
]
