"""The Secrets trials need: the Azure storage account's key (from Key Vault, as NNI read it) and image pull
secrets made of ``privateRegistryAuthPath`` files. Created (or replaced) once, when the service starts."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.kubernetes.client import KubeClient
from trialfleet.training_services.kubernetes.config import K8sAzureStorageConfig, K8sRoleConfig
from trialfleet.training_services.kubernetes.storage import azure_secret_name


async def prepare_secrets(
    client: KubeClient, platform: str, storage: object, roles: Mapping[str, K8sRoleConfig]
) -> dict[str, tuple[str, ...]]:
    """The storage's Secret, if it needs one, and each role's image pull secret: role → secret names."""
    if isinstance(storage, K8sAzureStorageConfig):
        key = await azure_storage_key(platform, storage)
        await client.apply_secret(azure_secret(storage, key))
    pull_secrets: dict[str, tuple[str, ...]] = {}
    for name, role in roles.items():
        if role.private_registry_auth_path is not None:
            secret = await asyncio.to_thread(registry_secret, platform, role.private_registry_auth_path)
            await client.apply_secret(secret)
            pull_secrets[name] = (secret["metadata"]["name"],)
    return pull_secrets


async def azure_storage_key(platform: str, storage: K8sAzureStorageConfig) -> str:
    """The storage account's key, from Azure Key Vault through the Azure CLI, as NNI fetched it."""
    argv = ["az", "keyvault", "secret", "show", "--vault-name", storage.key_vault_name]
    argv += ["--name", storage.key_vault_key, "--query", "value", "--output", "tsv"]
    where = f"secret {storage.key_vault_key!r} of key vault {storage.key_vault_name!r}"
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
    except (OSError, TimeoutError) as exc:
        raise PlatformError(f"{platform}: cannot read the {where} with the Azure CLI (az): {exc}") from exc
    key = out.decode().strip()
    if process.returncode != 0 or not key:
        message = err.decode(errors="replace").strip() or "no value"
        raise PlatformError(f"{platform}: cannot read the {where} with the Azure CLI: {message}")
    return key


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def azure_secret(storage: K8sAzureStorageConfig, key: str) -> dict[str, Any]:
    """What the azureFile volume reads the account from (the keys the kubelet's driver expects)."""
    data = {"azurestorageaccountname": _b64(storage.azure_account), "azurestorageaccountkey": _b64(key)}
    name = azure_secret_name(storage.azure_account)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque", "data": data}


def registry_secret(platform: str, path: Path) -> dict[str, Any]:
    """A docker ``config.json`` (``privateRegistryAuthPath``) as an image pull Secret named after its content."""
    try:
        content = path.read_bytes()
        json.loads(content)
    except (OSError, ValueError) as exc:
        raise PlatformError(
            f"{platform}: privateRegistryAuthPath {path} is not a readable docker config: {exc}"
        ) from exc
    name = f"trialfleet-registry-{hashlib.sha256(content).hexdigest()[:12]}"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": _b64(content)},
    }
