"""``platform: dlc``: Alibaba PAI-DLC (accepted so NNI configs load; no service yet)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trialfleet.config.base import Secret
from trialfleet.config.service import TrainingServiceConfig


class DlcConfig(TrainingServiceConfig):
    """Alibaba PAI-DLC."""

    platform: Literal["dlc"] = "dlc"
    """`dlc` (accepted so NNI configs load; refused at start: not available yet)."""
    type: str = "Worker"
    """NNI's DLC replica type."""
    image: str
    """The jobs' image."""
    job_type: Literal["TFJob", "PyTorchJob"] = "TFJob"
    """The DLC job kind."""
    pod_count: int = Field(gt=0)
    """Pods per job."""
    ecs_spec: str
    """The ECS instance type."""
    region: str
    """The Alibaba Cloud region."""
    workspace_id: str
    """The PAI workspace."""
    nas_data_source_id: str
    """The NAS data source mounted in jobs."""
    oss_data_source_id: str | None = None
    """An OSS data source mounted in jobs."""
    access_key_id: str
    """The Alibaba Cloud access key id."""
    access_key_secret: Secret
    """The access key's secret."""
    local_storage_mount_point: str
    """Where this machine mounts the NAS."""
    container_storage_mount_point: str
    """Where jobs see it."""
