"""The emulated workspace: its identity and URLs, its assets (code and environment versions), and how its resources
look on the wire (ARM resource JSON with ``id``, ``name``, ``type``, ``properties``, ``systemData``)."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .jobs import Job

PROVIDER = "Microsoft.MachineLearningServices"


@dataclass(frozen=True)
class WorkspaceConfig:
    subscription_id: str = "00000000-0000-4000-8000-00000000a0a1"
    resource_group: str = "trialfleet-rg"
    workspace_name: str = "trialfleet-ws"
    location: str = "eastus"
    computes: tuple[str, ...] = ("cpu-cluster", "gpu-cluster")
    storage_account: str = "trialfleetwsstore"
    workspace_id: str = "8c3f1f4e-4d0b-4c9e-9d1a-5b7e2f0c6a11"

    @property
    def arm_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
            f"/providers/{PROVIDER}/workspaces/{self.workspace_name}"
        )

    @property
    def blobstore_container(self) -> str:
        return f"azureml-blobstore-{self.workspace_id}"

    @property
    def artifact_container(self) -> str:
        return "azureml"


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d}+00:00"


def system_data(created: float, modified: float | None = None) -> dict[str, Any]:
    return {
        "createdAt": iso(created),
        "createdBy": "trialfleet emulator principal",
        "createdByType": "Application",
        "lastModifiedAt": iso(modified or created),
        "lastModifiedBy": "trialfleet emulator principal",
        "lastModifiedByType": "Application",
    }


@dataclass
class Asset:
    """A code or environment version as stored."""

    kind: str  # "codes" or "environments"
    name: str
    version: str
    properties: dict[str, Any]
    created: float
    modified: float


@dataclass
class Assets:
    items: dict[tuple[str, str, str], Asset] = field(default_factory=dict)
    pending_uploads: dict[str, str] = field(default_factory=dict)  # pendingUploadId -> blob prefix
    lock: threading.Lock = field(default_factory=threading.Lock)

    def put(
        self, kind: str, name: str, version: str, properties: dict[str, Any], now: float
    ) -> tuple[Asset, bool]:
        """Store a version; True when it was created rather than updated."""
        with self.lock:
            previous = self.items.get((kind, name, version))
            asset = Asset(kind, name, version, properties, previous.created if previous else now, now)
            self.items[(kind, name, version)] = asset
            return asset, previous is None

    def get(self, kind: str, name: str, version: str) -> Asset | None:
        with self.lock:
            return self.items.get((kind, name, version))

    def code_by_hash(self, digest: str) -> list[Asset]:
        with self.lock:
            return [
                a
                for (kind, _, _), a in self.items.items()
                if kind == "codes" and a.properties.get("properties", {}).get("hash_sha256") == digest
            ]


def asset_resource(config: WorkspaceConfig, asset: Asset) -> dict[str, Any]:
    properties = {"isArchived": False, "isAnonymous": False, "tags": {}, "properties": {}, **asset.properties}
    properties["provisioningState"] = "Succeeded"
    if asset.kind == "environments":
        properties.setdefault("environmentType", "UserCreated")
        properties.setdefault("osType", "Linux")
        properties.setdefault("autoRebuild", "Disabled")
    return {
        "id": f"{config.arm_id}/{asset.kind}/{asset.name}/versions/{asset.version}",
        "name": asset.version,
        "type": f"{PROVIDER}/workspaces/{asset.kind}/versions",
        "properties": properties,
        "systemData": system_data(asset.created, asset.modified),
    }


def experiment_id(config: WorkspaceConfig, experiment: str) -> str:
    return str(uuid.uuid5(uuid.UUID(config.workspace_id), experiment))


def job_resource(
    config: WorkspaceConfig, job: Job, status: str, studio_base: str, tracking_uri: str
) -> dict[str, Any]:
    """A JobBase resource as GET returns it: what was sent, plus status, services, the default output, timestamps."""
    properties = dict(job.properties)
    properties["status"] = status
    properties.setdefault("experimentName", "Default")
    properties.setdefault("isArchived", job.archived)
    properties["services"] = {
        "Tracking": {"jobServiceType": "Tracking", "endpoint": tracking_uri},
        "Studio": {
            "jobServiceType": "Studio",
            "endpoint": f"{studio_base}/runs/{job.name}?wsid={config.arm_id}",
        },
    }
    outputs = dict(properties.get("outputs") or {})
    outputs.setdefault(
        "default",
        {
            "jobOutputType": "uri_folder",
            "mode": "ReadWriteMount",
            "uri": f"azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.{job.name}",
        },
    )
    properties["outputs"] = outputs
    extra = dict(properties.get("properties") or {})
    extra.update(
        {"_azureml.ComputeTargetType": "amlctrain", "ProcessInfoFile": "azureml-logs/process_info.json"}
    )
    extra["ProcessStatusFile"] = "azureml-logs/process_status.json"
    if job.start_time is not None:
        extra["StartTimeUtc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(job.start_time))
    if job.end_time is not None:
        extra["EndTimeUtc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(job.end_time))
    properties["properties"] = extra
    return {
        "id": f"{config.arm_id}/jobs/{job.name}",
        "name": job.name,
        "type": f"{PROVIDER}/workspaces/jobs",
        "properties": properties,
        "systemData": system_data(job.created),
    }


def datastore_resource(config: WorkspaceConfig, name: str, storage_suffix: str) -> dict[str, Any] | None:
    containers = {
        "workspaceblobstore": config.blobstore_container,
        "workspaceartifactstore": config.artifact_container,
    }
    if name not in containers:
        return None
    return {
        "id": f"{config.arm_id}/datastores/{name}",
        "name": name,
        "type": f"{PROVIDER}/workspaces/datastores",
        "properties": {
            "datastoreType": "AzureBlob",
            "accountName": config.storage_account,
            "containerName": containers[name],
            "endpoint": storage_suffix,
            "protocol": "https",
            "serviceDataAccessAuthIdentity": "WorkspaceSystemAssignedIdentity",
            "credentials": {"credentialsType": "AccountKey"},
            "isDefault": name == "workspaceblobstore",
            "tags": {},
            "properties": {},
        },
        "systemData": system_data(0.0),
    }
