"""The experiment config: NNI's v2 schema (and legacy v1, converted), loaded with errors that name the file,
the key path and what was expected. Every NNI config class name is exported here.

Each platform's block is modelled by its platform (``trialfleet/training_services/<platform>/config.py``);
those classes are re-exported here under NNI's names and loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.convert_v1 import convert_v1_to_v2
from trialfleet.config.experiment import ExperimentConfig
from trialfleet.config.loader import LoadedConfig, load_config
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.config.shared_storage import AzureBlobConfig, NfsConfig, SharedStorageConfig
from trialfleet.config.units import parse_size, parse_time

if TYPE_CHECKING:
    from trialfleet.training_services.aml.config import AmlConfig
    from trialfleet.training_services.dlc.config import DlcConfig
    from trialfleet.training_services.dlts.config import DltsConfig
    from trialfleet.training_services.kubernetes.config import (
        AdlConfig,
        FrameworkControllerConfig,
        FrameworkControllerRoleConfig,
        K8sAzureStorageConfig,
        K8sNfsConfig,
        K8sStorageConfig,
        KubeflowConfig,
        KubeflowRoleConfig,
    )
    from trialfleet.training_services.local.config import LocalConfig
    from trialfleet.training_services.openpai.config import OpenpaiConfig
    from trialfleet.training_services.ray.config import RayConfig
    from trialfleet.training_services.remote.config import RemoteConfig, RemoteMachineConfig
    from trialfleet.training_services.slurm.config import SlurmConfig

_PLATFORM_CONFIGS = {
    "LocalConfig": "local",
    "RemoteConfig": "remote",
    "RemoteMachineConfig": "remote",
    "SlurmConfig": "slurm",
    "RayConfig": "ray",
    "OpenpaiConfig": "openpai",
    "AmlConfig": "aml",
    "DlcConfig": "dlc",
    "DltsConfig": "dlts",
    "KubeflowConfig": "kubernetes",
    "KubeflowRoleConfig": "kubernetes",
    "FrameworkControllerConfig": "kubernetes",
    "FrameworkControllerRoleConfig": "kubernetes",
    "AdlConfig": "kubernetes",
    "K8sNfsConfig": "kubernetes",
    "K8sAzureStorageConfig": "kubernetes",
    "K8sStorageConfig": "kubernetes",
}

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
    "RayConfig",
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


def __getattr__(name: str) -> Any:
    package = _PLATFORM_CONFIGS.get(name)
    if package is None:
        raise AttributeError(f"module 'trialfleet.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trialfleet.training_services.{package}.config"), name)
    globals()[name] = value
    return value
