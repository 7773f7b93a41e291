"""The ``local`` platform: trials as process trees on this machine.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trialfleet.training_services.local.config import LocalConfig

if TYPE_CHECKING:
    from trialfleet.training_services.local.service import LocalTrainingService

__all__ = ["LocalConfig", "LocalTrainingService"]


def __getattr__(name: str) -> Any:
    if name == "LocalTrainingService":
        from trialfleet.training_services.local.service import LocalTrainingService

        return LocalTrainingService
    raise AttributeError(name)
