"""``platform: aml``: one Azure ML command job per trial."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trialfleet.config.service import DEFAULT_IMAGE, TrainingServiceConfig


class AmlConfig(TrainingServiceConfig):
    platform: Literal["aml"] = "aml"
    subscription_id: str
    resource_group: str
    workspace_name: str
    compute_target: str
    docker_image: str = DEFAULT_IMAGE
    max_trial_number_per_gpu: int = Field(default=1, gt=0)
