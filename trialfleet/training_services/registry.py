"""Platform name → TrainingService class. Built-ins are imported lazily; third parties register through the
``trialfleet.training_services`` entry-point group (name = platform, value = ``module:Class``)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from trialfleet.errors import PlatformNotAvailableError

if TYPE_CHECKING:
    from trialfleet.training_services.base import TrainingService

BUILTIN_PLATFORMS: dict[str, str] = {
    "local": "trialfleet.training_services.local:LocalTrainingService",
    "remote": "trialfleet.training_services.remote:RemoteTrainingService",
    "slurm": "trialfleet.training_services.slurm:SlurmTrainingService",
}

#: accepted by the config schema; refused at start until implemented
PLANNED_PLATFORMS: frozenset[str] = frozenset(
    {"openpai", "aml", "dlc", "kubeflow", "frameworkcontroller", "adl", "dlts", "hybrid"}
)


def available_platforms() -> list[str]:
    names = set(BUILTIN_PLATFORMS)
    names.update(ep.name for ep in entry_points(group="trialfleet.training_services"))
    return sorted(names)


def get_training_service_class(platform: str) -> type[TrainingService]:
    target = BUILTIN_PLATFORMS.get(platform)
    if target is None:
        for ep in entry_points(group="trialfleet.training_services"):
            if ep.name == platform:
                target = ep.value
                break
    if target is None:
        if platform in PLANNED_PLATFORMS:
            raise PlatformNotAvailableError(
                f"platform {platform!r} is not available yet in this trialfleet version; "
                f"available: {', '.join(available_platforms())}"
            )
        raise PlatformNotAvailableError(
            f"unknown platform {platform!r}; available: {', '.join(available_platforms())}"
        )
    module_name, _, class_name = target.partition(":")
    cls: type[TrainingService] = getattr(importlib.import_module(module_name), class_name)
    return cls
