"""The ARM routes of one workspace (cluster-platforms.md §6.2): workspace, computes, datastores, code and environment
versions with the pending-upload handshake, and jobs with their cancel and delete long-running operations.

Base path: ``/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.MachineLearningServices/workspaces/{ws}``.
Any ``api-version`` is accepted (the request log keeps it). A cancel or delete answers 202 with ``Location`` (an
``mfeOperationResults`` URL) and ``Retry-After``; that URL answers 202 until the job is terminal (or gone), then 200.
"""

from __future__ import annotations

import copy
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .blob import container_sas
from .clock import Clock
from .jobs import Job, JobEngine
from .storage import StorageService
from .validation import check_job_body, check_job_name, user_error
from .wire import HttpError, Request, Response, Router, arm_error
from .workspace import (
    PROVIDER,
    Assets,
    WorkspaceConfig,
    asset_resource,
    datastore_resource,
    job_resource,
    system_data,
)

NAME = r"[^/]+"


@dataclass
class Urls:
    base: str  # https://127.0.0.1:<port>

    def tracking(self, config: WorkspaceConfig, scheme: str = "https") -> str:
        host = self.base.split("://", 1)[1]
        return f"{scheme}://{host}/mlflow/v1.0{config.arm_id}"


class ArmRoutes:
    def __init__(
        self,
        config: WorkspaceConfig,
        assets: Assets,
        engine: JobEngine,
        storage: StorageService,
        urls: Urls,
        clock: Clock,
        hidden_gets_after_create: Callable[[], int],
    ) -> None:
        self.config = config
        self.assets = assets
        self.engine = engine
        self.storage = storage
        self.urls = urls
        self.clock = clock
        self.hidden_gets_after_create = hidden_gets_after_create
        self.retry_after = 1  # seconds, sent with 202s of cancel and delete
        self.storage_suffix = storage.suffix

    def register(self, router: Router) -> None:
        ws = re.escape(self.config.arm_id)
        router.add("GET", ws, self.get_workspace)
        router.add("GET", ws + rf"/computes/(?P<name>{NAME})", self.get_compute)
        router.add("GET", ws + rf"/datastores/(?P<name>{NAME})", self.get_datastore)
        router.add("POST", ws + rf"/datastores/(?P<name>{NAME})/listSecrets", self.list_secrets)
        router.add(
            "GET", ws + rf"/(?P<kind>codes|environments)/(?P<name>{NAME})/versions", self.list_versions
        )
        router.add(
            "POST",
            ws + rf"/codes/(?P<name>{NAME})/versions/(?P<version>{NAME})/startPendingUpload",
            self.start_pending_upload,
        )
        router.add(
            "PUT",
            ws + rf"/(?P<kind>codes|environments)/(?P<name>{NAME})/versions/(?P<version>{NAME})",
            self.put_version,
        )
        router.add(
            "GET",
            ws + rf"/(?P<kind>codes|environments)/(?P<name>{NAME})/versions/(?P<version>{NAME})",
            self.get_version,
        )
        router.add("GET", ws + "/jobs", self.list_jobs)
        router.add("PUT", ws + rf"/jobs/(?P<name>{NAME})", self.put_job)
        router.add("GET", ws + rf"/jobs/(?P<name>{NAME})", self.get_job)
        router.add("DELETE", ws + rf"/jobs/(?P<name>{NAME})", self.delete_job)
        router.add("POST", ws + rf"/jobs/(?P<name>{NAME})/cancel", self.cancel_job)
        operations = rf"/subscriptions/{re.escape(self.config.subscription_id)}/providers/{PROVIDER}/locations/{NAME}/mfeOperationResults/(?P<op>{NAME})"
        router.add("GET", operations, self.operation_result)

    # workspace, computes, datastores

    def get_workspace(self, request: Request, match: re.Match[str]) -> Response:
        c = self.config
        group = f"/subscriptions/{c.subscription_id}/resourceGroups/{c.resource_group}/providers"
        return Response.json(
            200,
            {
                "id": c.arm_id,
                "name": c.workspace_name,
                "type": f"{PROVIDER}/workspaces",
                "location": c.location,
                "kind": "Default",
                "tags": {},
                "sku": {"name": "Basic", "tier": "Basic"},
                "identity": {
                    "type": "SystemAssigned",
                    "principalId": str(uuid.uuid4()),
                    "tenantId": str(uuid.uuid4()),
                },
                "properties": {
                    "friendlyName": c.workspace_name,
                    "workspaceId": c.workspace_id,
                    "storageAccount": f"{group}/Microsoft.Storage/storageAccounts/{c.storage_account}",
                    "keyVault": f"{group}/Microsoft.Keyvault/vaults/{c.workspace_name}kv",
                    "applicationInsights": f"{group}/Microsoft.insights/components/{c.workspace_name}ai",
                    "discoveryUrl": f"{self.urls.base}/discovery",
                    "mlFlowTrackingUri": self.urls.tracking(c, scheme="azureml"),
                    "provisioningState": "Succeeded",
                    "hbiWorkspace": False,
                    "publicNetworkAccess": "Enabled",
                    "storageHnsEnabled": False,
                    "v1LegacyMode": False,
                },
                "systemData": system_data(0.0),
            },
        )

    def get_compute(self, request: Request, match: re.Match[str]) -> Response:
        name = match["name"]
        if name not in self.config.computes:
            return arm_error(
                404,
                "ResourceNotFound",
                f"Compute '{name}' was not found in workspace '{self.config.workspace_name}'.",
            )
        return Response.json(
            200,
            {
                "id": f"{self.config.arm_id}/computes/{name}",
                "name": name,
                "type": f"{PROVIDER}/workspaces/computes",
                "location": self.config.location,
                "properties": {
                    "computeType": "AmlCompute",
                    "provisioningState": "Succeeded",
                    "properties": {
                        "vmSize": "STANDARD_DS3_V2",
                        "vmPriority": "Dedicated",
                        "scaleSettings": {"minNodeCount": 0, "maxNodeCount": 4},
                    },
                },
            },
        )

    def get_datastore(self, request: Request, match: re.Match[str]) -> Response:
        resource = datastore_resource(self.config, match["name"], self.storage_suffix)
        if resource is None:
            return arm_error(404, "UserError", f"Datastore '{match['name']}' was not found.")
        return Response.json(200, resource)

    def list_secrets(self, request: Request, match: re.Match[str]) -> Response:
        if datastore_resource(self.config, match["name"], self.storage_suffix) is None:
            return arm_error(404, "UserError", f"Datastore '{match['name']}' was not found.")
        return Response.json(200, {"secretsType": "AccountKey", "key": self.storage.store.key})

    # code and environment versions

    def list_versions(self, request: Request, match: re.Match[str]) -> Response:
        kind, name = match["kind"], match["name"]
        digest = request.query.get("hash")
        if kind == "codes" and digest:
            found = self.assets.code_by_hash(
                digest
            )  # a hash lookup spans names: the SDK asks under a random one
        else:
            with self.assets.lock:
                found = [a for (k, n, _), a in self.assets.items.items() if k == kind and n == name]
        return Response.json(200, {"value": [asset_resource(self.config, a) for a in found]})

    def start_pending_upload(self, request: Request, match: re.Match[str]) -> Response:
        body = request.json()
        if not isinstance(body, dict) or body.get("pendingUploadType") not in (
            "TemporaryBlobReference",
            "None",
        ):
            raise user_error(
                "pendingUploadType must be 'TemporaryBlobReference'.", target="pendingUploadType"
            )
        upload_id = str(uuid.uuid4())
        prefix = f"LocalUpload/{secrets.token_hex(16)}"
        self.assets.pending_uploads[upload_id] = prefix
        blob_uri = self.storage.path_style_url(self.config.blobstore_container, prefix)
        sas = container_sas(self.clock, permissions="racwdl", lifetime=3600)
        group = f"/subscriptions/{self.config.subscription_id}/resourceGroups/{self.config.resource_group}"
        return Response.json(
            200,
            {
                "blobReferenceForConsumption": {
                    "blobUri": blob_uri,
                    "storageAccountArmId": f"{group}/providers/Microsoft.Storage/storageAccounts/{self.config.storage_account}",
                    "credential": {"credentialType": "SAS", "sasUri": f"{blob_uri}?{sas}"},
                },
                "pendingUploadId": upload_id,
                "pendingUploadType": "TemporaryBlobReference",
            },
        )

    def put_version(self, request: Request, match: re.Match[str]) -> Response:
        body = request.json()
        properties = body.get("properties") if isinstance(body, dict) else None
        if not isinstance(properties, dict):
            raise user_error(
                "The request body must be a JSON object with a 'properties' object.", target="properties"
            )
        kind = match["kind"]
        if kind == "codes" and not properties.get("codeUri"):
            raise user_error("CodeUri is required for a code version.", target="codeUri")
        if kind == "environments" and not (properties.get("image") or properties.get("build")):
            raise user_error(
                "An environment version needs either an image or a build context.", target="image"
            )
        asset, created = self.assets.put(
            kind, match["name"], match["version"], copy.deepcopy(properties), self.clock.now()
        )
        return Response.json(201 if created else 200, asset_resource(self.config, asset))

    def get_version(self, request: Request, match: re.Match[str]) -> Response:
        asset = self.assets.get(match["kind"], match["name"], match["version"])
        if asset is None:
            kind = "Code" if match["kind"] == "codes" else "Environment"
            return arm_error(
                404, "UserError", f"{kind} container={match['name']}, version={match['version']} not found"
            )
        return Response.json(200, asset_resource(self.config, asset))

    # jobs

    def render(self, job: Job) -> dict[str, Any]:
        status = self.engine.observe(job)
        return job_resource(
            self.config, job, status, f"{self.urls.base}/studio", self.urls.tracking(self.config, "azureml")
        )

    def find_job(self, name: str) -> Job:
        with self.engine.lock:
            job = self.engine.jobs.get(name)
        if job is None:
            raise HttpError(
                arm_error(
                    404,
                    "UserError",
                    f"Could not find job '{name}' in workspace '{self.config.workspace_name}'.",
                )
            )
        return job

    def put_job(self, request: Request, match: re.Match[str]) -> Response:
        name = match["name"]
        check_job_name(name)
        properties = copy.deepcopy(check_job_body(request.json(), self.config.arm_id, self.config.computes))
        self._check_references(properties)
        properties.pop("status", None)
        with self.engine.lock:
            existing = self.engine.jobs.get(name)
            if existing is not None:
                for key in ("displayName", "description", "tags", "isArchived"):
                    if key in properties:
                        existing.properties[key] = properties[key]
                existing.archived = bool(existing.properties.get("isArchived", False))
                return Response.json(200, self.render(existing))
            job = Job(name=name, properties=properties, created=self.clock.now())
            job.hidden_gets = self.hidden_gets_after_create()
            self.engine.add(job)
            return Response.json(201, self.render(job))

    def _check_references(self, properties: dict[str, Any]) -> None:
        for key, kind in (("codeId", "codes"), ("environmentId", "environments")):
            reference = properties.get(key)
            if not reference or not reference.lower().startswith(self.config.arm_id.lower() + "/"):
                continue  # registry assets (azureml://registries/...) are not this workspace's to check
            found = re.fullmatch(rf".*/{kind}/([^/]+)/versions/([^/]+)", reference)
            if found is None or self.assets.get(kind, found[1], found[2]) is None:
                raise user_error(
                    f"{key} '{reference}' does not refer to an existing asset of this workspace.", target=key
                )

    def get_job(self, request: Request, match: re.Match[str]) -> Response:
        job = self.find_job(match["name"])
        with self.engine.lock:
            if job.hidden_gets > 0:  # eventual consistency: a fresh job is not yet readable everywhere
                job.hidden_gets -= 1
                raise HttpError(
                    arm_error(
                        404,
                        "UserError",
                        f"Could not find job '{job.name}' in workspace '{self.config.workspace_name}'.",
                    )
                )
        return Response.json(200, self.render(job))

    def list_jobs(self, request: Request, match: re.Match[str]) -> Response:
        view = request.query.get("listViewType", "ActiveOnly")
        with self.engine.lock:
            jobs = sorted(self.engine.jobs.values(), key=lambda j: j.created, reverse=True)
        if view == "ActiveOnly":
            jobs = [j for j in jobs if not j.archived]
        elif view == "ArchivedOnly":
            jobs = [j for j in jobs if j.archived]
        job_type = request.query.get("jobType")
        if job_type:
            jobs = [j for j in jobs if j.properties.get("jobType") == job_type]
        return Response.json(200, {"value": [self.render(j) for j in jobs]})

    def _accepted(self, operation: str, request: Request) -> Response:
        api_version = request.query.get("api-version", "2023-04-01-preview")
        location = (
            f"{self.urls.base}/subscriptions/{self.config.subscription_id}/providers/{PROVIDER}/locations/"
            f"{self.config.location}/mfeOperationResults/{operation}?api-version={api_version}"
        )
        return Response(202, b"", {"Location": location, "Retry-After": str(self.retry_after)})

    def cancel_job(self, request: Request, match: re.Match[str]) -> Response:
        job = self.find_job(match["name"])
        self.engine.request_cancel(job)
        return self._accepted(f"jc:{self.config.workspace_id}:{job.name}", request)

    def delete_job(self, request: Request, match: re.Match[str]) -> Response:
        job = self.find_job(match["name"])
        with self.engine.lock:
            job.deleted = True
        self.engine.request_cancel(job)
        return self._accepted(f"jd:{self.config.workspace_id}:{job.name}", request)

    def operation_result(self, request: Request, match: re.Match[str]) -> Response:
        kind, _, name = match["op"].partition(f":{self.config.workspace_id}:")
        if kind not in ("jc", "jd") or not name:
            return arm_error(404, "NotFound", f"Operation '{match['op']}' was not found.")
        with self.engine.lock:
            job = self.engine.jobs.get(name)
            if job is not None:
                self.engine.observe(job)  # the poller is shown the job's progress
            done = job is None if kind == "jd" else (job is None or job.terminal)
        if done:
            return Response(200, b"", {})
        return Response(
            202,
            b"",
            {
                "Location": self._accepted(match["op"], request).headers["Location"],
                "Retry-After": str(self.retry_after),
            },
        )
