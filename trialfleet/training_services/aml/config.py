"""``platform: aml``: one Azure ML command job per trial attempt (SDK v2, ``azure-ai-ml``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from trialfleet.config.base import JsonMapping
from trialfleet.config.service import DEFAULT_IMAGE, MANAGER_IP_UNUSED, TrainingServiceConfig


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
    max_trial_number_per_gpu: int | None = Field(default=None, gt=0)  # NNI's default: 1
    """NNI's trials per GPU."""
    cloud: str | None = None
    """The Azure cloud: `AzureCloud` when unset, `AzureChinaCloud`, `AzureUSGovernment`, or a name of your own
    described by `cloudMetadata`."""
    cloud_metadata: JsonMapping | None = None
    """A sovereign or private cloud's endpoints, as `MLClient`'s `cloud_metadata`."""
    disable_instance_discovery: bool = False
    """Let azure-identity use an Entra ID authority it does not know (Azure Stack, a private cloud)."""
    reuse_mode: bool = False
    """Accepted for NNI configs; `true` (long-lived jobs running trial after trial, NNI's AML mode) is warned about:
    each trial attempt is an Azure ML job of its own."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset(
        {"cloud", "cloud_metadata", "disable_instance_discovery", "reuse_mode"}
    )
    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + "; they report through the job's MLflow run",
        "max_trial_number_per_gpu": "every trial is a job of its own on the compute target",
        "reuse_mode": "every trial attempt is an Azure ML job of its own; no job is kept to run several trials",
    }
