"""The ``remote`` platform: trials on a fleet of SSH hosts."""

from __future__ import annotations

from trialfleet.training_services.remote.config import RemoteConfig, RemoteMachineConfig
from trialfleet.training_services.remote.service import RemoteTrainingService

__all__ = ["RemoteConfig", "RemoteMachineConfig", "RemoteTrainingService"]
