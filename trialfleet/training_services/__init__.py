"""Training services: where trials run. The public surface for platforms, built-in and third-party.

A platform subclasses :class:`TrainingService` (the contract is in :mod:`.base`) and its config model subclasses
:class:`TrainingServiceConfig`; a plugin registers the service class under the ``trialfleet.training_services``
entry-point group (docs/plugins.md) and tests it with the shipped contract suite (:mod:`trialfleet.testing`).
Built-in services and configs are exported for subclassing. Names load on first use, so importing this package
loads no platform.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialfleet.config.service import TrainingServiceConfig
    from trialfleet.training_services.base import ExperimentContext, LiveTrial, TrainingService
    from trialfleet.training_services.events import (
        PollBatch,
        TrialEnded,
        TrialMetric,
        TrialProblem,
        TrialStarted,
        TrialWaiting,
    )
    from trialfleet.training_services.local import LocalConfig, LocalTrainingService
    from trialfleet.training_services.local.service import LocalHandle
    from trialfleet.training_services.registry import available_platforms, get_platform, platforms
    from trialfleet.training_services.remote import RemoteConfig, RemoteMachineConfig, RemoteTrainingService
    from trialfleet.training_services.slurm import SlurmConfig, SlurmTrainingService
    from trialfleet.training_services.spec import Deferred, Submitted, TrialSpec

_WHERE = {
    "TrainingServiceConfig": "trialfleet.config.service",
    "ExperimentContext": "trialfleet.training_services.base",
    "LiveTrial": "trialfleet.training_services.base",
    "TrainingService": "trialfleet.training_services.base",
    "PollBatch": "trialfleet.training_services.events",
    "TrialEnded": "trialfleet.training_services.events",
    "TrialMetric": "trialfleet.training_services.events",
    "TrialProblem": "trialfleet.training_services.events",
    "TrialStarted": "trialfleet.training_services.events",
    "TrialWaiting": "trialfleet.training_services.events",
    "Deferred": "trialfleet.training_services.spec",
    "Submitted": "trialfleet.training_services.spec",
    "TrialSpec": "trialfleet.training_services.spec",
    "LocalConfig": "trialfleet.training_services.local.config",
    "LocalTrainingService": "trialfleet.training_services.local.service",
    "LocalHandle": "trialfleet.training_services.local.service",
    "RemoteConfig": "trialfleet.training_services.remote.config",
    "RemoteMachineConfig": "trialfleet.training_services.remote.config",
    "RemoteTrainingService": "trialfleet.training_services.remote.service",
    "SlurmConfig": "trialfleet.training_services.slurm.config",
    "SlurmTrainingService": "trialfleet.training_services.slurm.service",
    "available_platforms": "trialfleet.training_services.registry",
    "get_platform": "trialfleet.training_services.registry",
    "platforms": "trialfleet.training_services.registry",
}

__all__ = [
    "Deferred",
    "ExperimentContext",
    "LiveTrial",
    "LocalConfig",
    "LocalHandle",
    "LocalTrainingService",
    "PollBatch",
    "RemoteConfig",
    "RemoteMachineConfig",
    "RemoteTrainingService",
    "SlurmConfig",
    "SlurmTrainingService",
    "Submitted",
    "TrainingService",
    "TrainingServiceConfig",
    "TrialEnded",
    "TrialMetric",
    "TrialProblem",
    "TrialSpec",
    "TrialStarted",
    "TrialWaiting",
    "available_platforms",
    "get_platform",
    "platforms",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'trialfleet.training_services' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
