"""The ``openpai`` platform: one OpenPAI job per trial attempt, its files on a storage the manager mounts too.

The service is imported only when asked for: the config model is imported by every config load (``create``
reads the config before anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trialfleet.training_services.openpai.config import OpenpaiConfig

if TYPE_CHECKING:
    from trialfleet.training_services.openpai.service import OpenpaiTrainingService

__all__ = ["OpenpaiConfig", "OpenpaiTrainingService"]


def __getattr__(name: str) -> Any:
    if name == "OpenpaiTrainingService":
        from trialfleet.training_services.openpai.service import OpenpaiTrainingService

        return OpenpaiTrainingService
    raise AttributeError(name)
