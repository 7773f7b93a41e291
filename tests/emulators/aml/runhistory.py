"""The workspace's discovery document and the run-history service's run details (status, times, error, and the
``logFiles`` map of log name to a read-only SAS URL), which ``jobs.stream`` and a log-following client poll."""

from __future__ import annotations

import re
import time
from typing import Any

from .blob import container_sas
from .clock import Clock
from .jobs import Job, JobEngine
from .storage import StorageService
from .wire import HttpError, Request, Response, Router, arm_error
from .workspace import WorkspaceConfig, experiment_id

USER_LOG = "user_logs/std_log.txt"


def log_prefix(job_name: str) -> str:
    """Where a job's logs and outputs live in the artifact container (the ``default`` output's path)."""
    return f"ExperimentRun/dcid.{job_name}"


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d}+00:00"


class RunHistoryRoutes:
    def __init__(
        self, config: WorkspaceConfig, engine: JobEngine, storage: StorageService, clock: Clock, base_url: str
    ) -> None:
        self.config = config
        self.engine = engine
        self.storage = storage
        self.clock = clock
        self.base_url = base_url.rstrip("/")

    def register(self, router: Router) -> None:
        router.add("GET", "/discovery", self.discovery)
        history = re.escape(f"/history/v1.0{self.config.arm_id}")
        for scope in ("", r"/experimentids/[^/]+", r"/experiments/[^/]+"):
            router.add("GET", history + scope + r"/runs/(?P<name>[^/]+)/details", self.details)

    def discovery(self, request: Request, match: re.Match[str]) -> Response:
        names = (
            "api",
            "catalog",
            "experimentation",
            "gallery",
            "history",
            "hyperdrive",
            "labeling",
            "modelmanagement",
            "pipelines",
        )
        document: dict[str, str] = {name: self.base_url for name in names}
        document["studio"] = f"{self.base_url}/studio"
        return Response.json(200, document)

    def log_files(self, job: Job) -> dict[str, str]:
        """Each existing log of the job with a read SAS URL, as run history hands them out."""
        container = self.config.artifact_container
        prefix = log_prefix(job.name) + "/"
        sas = container_sas(self.clock, permissions="r", lifetime=3600).replace("sr=c", "sr=b")
        return {
            name[len(prefix) :]: f"{self.storage.path_style_url(container, name)}?{sas}"
            for name in self.storage.store.names(container, prefix)
            if name[len(prefix) :].startswith(("user_logs/", "system_logs/", "azureml-logs/"))
        }

    def details(self, request: Request, match: re.Match[str]) -> Response:
        name = match["name"]
        with self.engine.lock:
            job = self.engine.jobs.get(name)
            if job is None:
                raise HttpError(arm_error(404, "UserError", f"Run {name} was not found"))
            status = self.engine.observe(job)
            return Response.json(200, self.render(job, status))

    def render(self, job: Job, status: str) -> dict[str, Any]:
        experiment = str(job.properties.get("experimentName") or "Default")
        compute = str(job.properties.get("computeId", "")).rsplit("/", 1)[-1]
        return {
            "runId": job.name,
            "runUuid": job.name if len(job.name) == 36 else None,
            "rootRunId": job.name,
            "target": compute,
            "status": status,
            "createdTimeUtc": _iso(job.created),
            "startTimeUtc": _iso(job.start_time),
            "endTimeUtc": _iso(job.end_time),
            "error": job.error,
            "warnings": [],
            "tags": dict(job.properties.get("tags") or {}),
            "properties": {
                "azureml.runsource": "azureml.scriptrun",
                "_azureml.ComputeTargetType": "amlctrain",
            },
            "parameters": {},
            "services": {},
            "inputDatasets": [],
            "outputDatasets": [],
            "logFiles": self.log_files(job),
            "runTypeV2": {"orchestrator": "Execution", "traits": ["azureml.script", "scriptRun"]},
            "experimentId": experiment_id(self.config, experiment),
            "hasVirtualParent": False,
        }
