"""The Kubernetes platforms' services, by the names the registry knows them under (``kubeflow``,
``frameworkcontroller``, ``adl``): each in its own module, on the shared layer of :mod:`.cluster`."""

from __future__ import annotations

from trialfleet.training_services.kubernetes.adaptdl import AdlTrainingService
from trialfleet.training_services.kubernetes.frameworkcontroller import FrameworkControllerTrainingService
from trialfleet.training_services.kubernetes.kubeflow import KubeflowTrainingService

__all__ = ["AdlTrainingService", "FrameworkControllerTrainingService", "KubeflowTrainingService"]
