"""The ``aml`` platform: one Azure ML command job per trial attempt (SDK v2, ``trialfleet[aml]``).

The service is imported only when asked for; the Azure SDK only when the platform starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trialfleet.training_services.aml.config import AmlConfig

if TYPE_CHECKING:
    from trialfleet.training_services.aml.service import AmlTrainingService

__all__ = ["AmlConfig", "AmlTrainingService"]


def __getattr__(name: str) -> Any:
    if name == "AmlTrainingService":
        from trialfleet.training_services.aml.service import AmlTrainingService

        return AmlTrainingService
    raise AttributeError(name)
