"""The experiment config: NNI's v2 schema (and legacy v1, converted), loaded with errors that name the file,
the key path and what was expected. NNI's config class names but the platforms' are exported here.

Each platform's block is modelled by its platform (``trialfleet/training_services/<platform>/config.py``); the
package ``trialfleet`` exports those classes under NNI's names (this package sits below the platforms).
"""

from __future__ import annotations

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.convert_v1 import convert_v1_to_v2
from trialfleet.config.experiment import ExperimentConfig
from trialfleet.config.loader import LoadedConfig, load_config
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.config.shared_storage import AzureBlobConfig, NfsConfig, SharedStorageConfig
from trialfleet.config.units import parse_size, parse_time

__all__ = [
    "AlgorithmConfig",
    "AzureBlobConfig",
    "ExperimentConfig",
    "LoadedConfig",
    "NfsConfig",
    "SharedStorageConfig",
    "TrainingServiceConfig",
    "convert_v1_to_v2",
    "load_config",
    "parse_size",
    "parse_time",
]
