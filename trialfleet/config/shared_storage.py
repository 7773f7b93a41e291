"""``sharedStorage``: an NFS export or Azure Blob container mounted on the manager and on every worker.

What trialfleet does with it is in ``training_services/shared_storage.py`` and docs/shared-storage.md.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from trialfleet.config.base import ConfigModel, ConfigPath, KeyPath, Secret, raise_problems

_NOMOUNT = "{} storage must be mounted on the manager's machine too: use usermount or nnimount"


class _SharedStorageBase(ConfigModel):
    storage_type: str
    """`NFS` or `AzureBlob`."""
    local_mount_point: ConfigPath
    """Where the storage is mounted on the manager's machine."""
    remote_mount_point: str
    """Where it is mounted on each worker (relative paths are below the worker's home)."""
    local_mounted: Literal["usermount", "nnimount", "nomount"]
    """`usermount`: you mounted it here; `nnimount`: trialfleet mounts it with NNI's commands; `nomount` is
    refused."""

    def _mount_problems(self) -> list[tuple[KeyPath, str]]:
        # the manager puts the code directory on the storage through its own mount (NNI refused nomount too)
        if self.local_mounted == "nomount":
            return [(("localMounted",), _NOMOUNT.format(self.storage_type))]
        return []


class NfsConfig(_SharedStorageBase):
    storage_type: Literal["NFS"] = "NFS"
    """`NFS`."""
    nfs_server: str
    """The NFS server's address."""
    exported_directory: str
    """The exported directory on the server."""

    @model_validator(mode="after")
    def _must_be_mounted(self) -> NfsConfig:
        raise_problems(self._mount_problems())
        return self


class AzureBlobConfig(_SharedStorageBase):
    """The account key is given (``storageAccountKey``) or read from an Azure Key Vault secret at start
    (``keyVaultName`` + ``keyVaultKey``, the names of NNI's Kubernetes Azure storage)."""

    storage_type: Literal["AzureBlob"] = "AzureBlob"
    """`AzureBlob`."""
    storage_account_name: str
    """The storage account."""
    storage_account_key: Secret | None = None
    """The account key; or give `keyVaultName` and `keyVaultKey` to read it from a Key Vault at start."""
    key_vault_name: str | None = None
    """A Key Vault holding the account key."""
    key_vault_key: str | None = None
    """The name of the Key Vault secret holding the account key."""
    container_name: str
    """The blob container mounted with `blobfuse2`."""

    @model_validator(mode="after")
    def _one_key_source(self) -> AzureBlobConfig:
        problems = self._mount_problems()
        vault = (self.key_vault_name, self.key_vault_key)
        if self.storage_account_key is not None and any(vault):
            problems.append((("storageAccountKey",), "give storageAccountKey or a key vault, not both"))
        elif self.storage_account_key is None and not all(vault):
            missing = "keyVaultKey" if self.key_vault_name else "keyVaultName"
            if not any(vault):
                problems.append(
                    (("storageAccountKey",), "required (or keyVaultName and keyVaultKey to read it from)")
                )
            else:
                problems.append(((missing,), "required with the other key vault setting"))
        raise_problems(problems)
        return self


SharedStorageConfig = Annotated[NfsConfig | AzureBlobConfig, Field(discriminator="storage_type")]
