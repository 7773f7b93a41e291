"""The Kubernetes platforms' services, by the names the registry knows them under (``frameworkcontroller``):
each in its own module, on the shared layer of :mod:`.cluster`."""

from __future__ import annotations

from trialfleet.training_services.kubernetes.frameworkcontroller import FrameworkControllerTrainingService

__all__ = ["FrameworkControllerTrainingService"]
