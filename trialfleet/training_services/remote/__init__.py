"""The ``remote`` platform: trials on a fleet of SSH hosts.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialfleet.training_services.lazy_service import service_attribute
from trialfleet.training_services.remote.config import RemoteConfig, RemoteMachineConfig

if TYPE_CHECKING:
    from trialfleet.training_services.remote.service import RemoteTrainingService

__all__ = ["RemoteConfig", "RemoteMachineConfig", "RemoteTrainingService"]


__getattr__ = service_attribute(__name__, "RemoteTrainingService")
