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
    local_mount_point: ConfigPath
    remote_mount_point: str
    local_mounted: Literal["usermount", "nnimount", "nomount"]

    def _mount_problems(self) -> list[tuple[KeyPath, str]]:
        # the manager puts the code directory on the storage through its own mount (NNI refused nomount too)
        if self.local_mounted == "nomount":
            return [(("localMounted",), _NOMOUNT.format(self.storage_type))]
        return []


class NfsConfig(_SharedStorageBase):
    storage_type: Literal["NFS"] = "NFS"
    nfs_server: str
    exported_directory: str

    @model_validator(mode="after")
    def _must_be_mounted(self) -> NfsConfig:
        raise_problems(self._mount_problems())
        return self


class AzureBlobConfig(_SharedStorageBase):
    """The account key is given (``storageAccountKey``) or read from an Azure Key Vault secret at start
    (``keyVaultName`` + ``keyVaultKey``, the names of NNI's Kubernetes Azure storage)."""

    storage_type: Literal["AzureBlob"] = "AzureBlob"
    storage_account_name: str
    storage_account_key: Secret | None = None
    key_vault_name: str | None = None
    key_vault_key: str | None = None
    container_name: str

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
