"""``platform: aml``: Azure ML command jobs (SDK v2, ``azure-ai-ml``), long-lived workers by default (NNI's AML
mode), or one job per trial attempt with ``reuseMode: false``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from trialfleet.config.base import Duration, JsonMapping
from trialfleet.config.service import (
    DEFAULT_IMAGE,
    MANAGER_IP_UNUSED,
    MAX_TRIALS_PER_GPU,
    TrainingServiceConfig,
)


class AmlConfig(TrainingServiceConfig):
    """NNI's ``AmlConfig`` keys, and where to find a sovereign or private Azure cloud.

    Credentials come from azure-identity's ``DefaultAzureCredential`` chain (``AZURE_CLIENT_ID`` /
    ``AZURE_TENANT_ID`` / ``AZURE_CLIENT_SECRET``, a managed identity, ``az login`` …), with
    ``AZURE_AUTHORITY_HOST`` for another Entra ID authority. ``cloud`` names the Azure cloud (the SDK's
    ``AzureCloud`` by default, ``AzureChinaCloud``, ``AzureUSGovernment``, or a name of your own with
    ``cloud_metadata``: its endpoints, as ``MLClient``'s ``cloud_metadata``). ``disable_instance_discovery``
    lets azure-identity use an authority it does not know (Azure Stack, a private cloud).
    """

    platform: Literal["aml"] = "aml"
    """`aml`."""
    subscription_id: str
    """The Azure subscription of the workspace."""
    resource_group: str
    """The workspace's resource group."""
    workspace_name: str
    """The Azure ML workspace."""
    compute_target: str
    """The compute cluster jobs run on (checked at start)."""
    docker_image: str = DEFAULT_IMAGE
    """The jobs' image."""
    max_trial_number_per_gpu: int = Field(default=1, gt=0, le=MAX_TRIALS_PER_GPU)  # NNI's default
    """With `reuseMode` and `trialGpuNumber`: how many trials one worker job runs at once, sharing its GPUs."""
    cloud: str | None = None
    """The Azure cloud: `AzureCloud` when unset, `AzureChinaCloud`, `AzureUSGovernment`, or a name of your own
    described by `cloudMetadata`."""
    cloud_metadata: JsonMapping | None = None
    """A sovereign or private cloud's endpoints, as `MLClient`'s `cloud_metadata`."""
    disable_instance_discovery: bool = False
    """Let azure-identity use an Entra ID authority it does not know (Azure Stack, a private cloud)."""
    reuse_mode: bool = True  # NNI's AmlConfig has no such key: NNI ran AML only in reuse mode
    """Run trials in long-lived worker jobs, trial after trial (NNI's AML mode, docs/reuse.md); `false`: every
    trial attempt is an Azure ML job of its own."""
    worker_idle_timeout: Duration = Field(default=60, gt=0)
    """With `reuseMode`: how long a worker job with no trial is kept before it is released (e.g. `5m`)."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset(
        {"cloud", "cloud_metadata", "disable_instance_discovery", "reuse_mode", "worker_idle_timeout"}
    )
    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + "; they report through the job's MLflow run",
    }

    def not_acted_on_here(self) -> dict[str, str]:
        """Keys whose use depends on ``reuseMode`` and ``trialGpuNumber``."""
        if not self.reuse_mode:
            return {
                "max_trial_number_per_gpu": "without reuseMode every trial attempt is a job of its own",
                "worker_idle_timeout": "without reuseMode there are no worker jobs",
            }
        if not self.trial_gpu_number:
            return {"max_trial_number_per_gpu": "a worker without GPUs runs one trial at a time"}
        return {}
