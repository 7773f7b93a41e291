"""``sharedStorage``: an NFS export or Azure Blob container mounted on the manager and on every worker."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from trialfleet.config.base import ConfigModel, ConfigPath, Secret, raise_problems


class _SharedStorageBase(ConfigModel):
    storage_type: str
    local_mount_point: ConfigPath
    remote_mount_point: str
    local_mounted: Literal["usermount", "nnimount", "nomount"]


class NfsConfig(_SharedStorageBase):
    storage_type: Literal["NFS"] = "NFS"
    nfs_server: str
    exported_directory: str

    @model_validator(mode="after")
    def _must_be_mounted(self) -> NfsConfig:
        if self.local_mounted == "nomount":
            raise_problems(
                [(("localMounted",), "NFS storage must be mounted locally: use usermount or nnimount")]
            )
        return self


class AzureBlobConfig(_SharedStorageBase):
    storage_type: Literal["AzureBlob"] = "AzureBlob"
    storage_account_name: str
    storage_account_key: Secret | None = None
    container_name: str


SharedStorageConfig = Annotated[NfsConfig | AzureBlobConfig, Field(discriminator="storage_type")]
