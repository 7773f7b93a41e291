"""``platform: dlc``: Alibaba PAI-DLC (accepted so NNI configs load; no service yet)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trialfleet.config.base import Secret
from trialfleet.config.service import TrainingServiceConfig


class DlcConfig(TrainingServiceConfig):
    """Alibaba PAI-DLC."""

    platform: Literal["dlc"] = "dlc"
    type: str = "Worker"
    image: str
    job_type: Literal["TFJob", "PyTorchJob"] = "TFJob"
    pod_count: int = Field(gt=0)
    ecs_spec: str
    region: str
    workspace_id: str
    nas_data_source_id: str
    oss_data_source_id: str | None = None
    access_key_id: str
    access_key_secret: Secret
    local_storage_mount_point: str
    container_storage_mount_point: str
