"""``platform: dlts``: Microsoft DLTS (DLWorkspace)."""

from __future__ import annotations

from typing import Literal

from trialfleet.config.base import Secret
from trialfleet.config.service import TrainingServiceConfig


class DltsConfig(TrainingServiceConfig):
    """Microsoft DLTS, removed from NNI before 3.0."""

    platform: Literal["dlts"] = "dlts"
    dashboard: str
    image: str
    cluster: str | None = None
    team: str | None = None
    email: str | None = None
    password: Secret | None = None
