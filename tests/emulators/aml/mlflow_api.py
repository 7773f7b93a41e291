"""The workspace's MLflow tracking server, the REST subset a job and a client use to log and read metrics.

AML serves MLflow under ``/mlflow/v1.0/<workspace ARM id>/api/2.0/mlflow/...``; the workspace advertises it as
``azureml://<host>/mlflow/v1.0/...`` (the ``azureml-mlflow`` plugin swaps the scheme for ``https``), and a job gets the
https form in ``MLFLOW_TRACKING_URI`` with ``MLFLOW_RUN_ID`` = the job's name: every job *is* an MLflow run.
Errors are MLflow's: ``{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": ...}``.

Runs are also created without a job, through MLflow's ``POST /api/2.0/mlflow/runs/create`` (``experiment_id``,
``start_time``, ``run_name``, ``tags``; answered with ``{"run": {"info", "data"}}``), as ``MlflowClient.create_run``
does from a laptop or inside a job; a run is nested under another by MLflow's ``mlflow.parentRunId`` tag
(``mlflow/utils/mlflow_tags.py``: ``MLFLOW_PARENT_RUN_ID``), which is how Azure ML shows child runs under a job.
The experiment must exist (Azure ML creates one with its first job), the tags obey the same limits, and the run
ends only by ``runs/update`` (``status`` ``FINISHED``/``FAILED``/``KILLED``, with ``end_time``).
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .jobs import Job, JobEngine
from .mlflow_limits import check_batch, check_metric_names, check_tags
from .wire import HttpError, Request, Response, Router
from .workspace import WorkspaceConfig, experiment_id

RUN_STATUS = {  # AML job status -> MLflow RunStatus
    "NotStarted": "SCHEDULED",
    "Starting": "SCHEDULED",
    "Provisioning": "SCHEDULED",
    "Preparing": "SCHEDULED",
    "Queued": "SCHEDULED",
    "Running": "RUNNING",
    "Finalizing": "RUNNING",
    "CancelRequested": "RUNNING",
    "Completed": "FINISHED",
    "Failed": "FAILED",
    "Canceled": "KILLED",
    "NotResponding": "FAILED",
    "Paused": "FAILED",
}


def mlflow_error(status: int, code: str, message: str) -> HttpError:
    return HttpError(Response.json(status, {"error_code": code, "message": message}))


@dataclass
class RunData:
    metrics: list[dict[str, Any]] = field(default_factory=list)  # in arrival order
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    status_updates: list[str] = field(default_factory=list)


@dataclass
class CreatedRun:
    """A run made by ``runs/create``, not by a job."""

    run_id: str
    experiment_id: str
    name: str
    start_time: int
    status: str = "RUNNING"
    end_time: int | None = None


class MlflowRoutes:
    def __init__(
        self, config: WorkspaceConfig, engine: JobEngine, artifact_uri: Callable[[str], str]
    ) -> None:
        self.config = config
        self.engine = engine
        self.artifact_uri = artifact_uri
        self.runs: dict[str, RunData] = {}
        self.created: dict[str, CreatedRun] = {}
        self.experiments: set[str] = set()  # made by experiments/create (a job's experiment is made with it)
        self.lock = threading.Lock()

    def register(self, router: Router) -> None:
        api = re.escape(f"/mlflow/v1.0{self.config.arm_id}/api/2.0/mlflow")
        router.add("GET", api + "/runs/get", self.get_run)
        router.add("POST", api + "/runs/create", self.create_run)
        router.add("POST", api + "/runs/update", self.update_run)
        router.add("POST", api + "/runs/log-metric", self.log_metric)
        router.add("POST", api + "/runs/log-batch", self.log_batch)
        router.add("POST", api + "/runs/log-parameter", self.log_parameter)
        router.add("POST", api + "/runs/set-tag", self.set_tag)
        router.add("GET", api + "/metrics/get-history", self.get_history)
        router.add("GET", api + "/experiments/get", self.get_experiment)
        router.add("GET", api + "/experiments/get-by-name", self.get_experiment_by_name)
        router.add("POST", api + "/experiments/create", self.create_experiment)

    def metrics(self, run_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.runs.get(run_id, RunData()).metrics)

    def _job(self, run_id: Any) -> Job | CreatedRun:
        """The job whose run this is, or the run made by ``runs/create``."""
        with self.engine.lock:
            job = self.engine.jobs.get(str(run_id)) if run_id else None
        if job is not None:
            return job
        with self.lock:
            created = self.created.get(str(run_id)) if run_id else None
        if created is None:
            raise mlflow_error(404, "RESOURCE_DOES_NOT_EXIST", f"Run '{run_id}' not found")
        return created

    def _data(self, run_id: str) -> RunData:
        return self.runs.setdefault(run_id, RunData())

    def _run(self, job: Job | CreatedRun) -> dict[str, Any]:
        with self.lock:
            data = self._data(_run_id(job))
            latest: dict[str, dict[str, Any]] = {}
            for metric in data.metrics:
                current = latest.get(metric["key"])
                if current is None or (metric["step"], metric["timestamp"]) >= (
                    current["step"],
                    current["timestamp"],
                ):
                    latest[metric["key"]] = metric
            params = [{"key": k, "value": v} for k, v in data.params.items()]
            tags = [{"key": k, "value": v} for k, v in data.tags.items()]
        if isinstance(job, CreatedRun):
            info = self._created_info(job)
            return {"info": info, "data": {"metrics": list(latest.values()), "params": params, "tags": tags}}
        experiment = str(job.properties.get("experimentName") or "Default")
        info: dict[str, Any] = {
            "run_id": job.name,
            "run_uuid": job.name,
            "run_name": job.properties.get("displayName") or job.name,
            "experiment_id": experiment_id(self.config, experiment),
            "user_id": "trialfleet emulator principal",
            "status": RUN_STATUS.get(job.status, "RUNNING"),
            "start_time": int((job.start_time or job.created) * 1000),
            "artifact_uri": self.artifact_uri(job.name),
            "lifecycle_stage": "active",
        }
        if job.end_time is not None:
            info["end_time"] = int(job.end_time * 1000)
        return {
            "info": info,
            "data": {"metrics": list(latest.values()), "params": params, "tags": tags},
            "inputs": {},
        }

    def get_run(self, request: Request, match: re.Match[str]) -> Response:
        job = self._job(request.query.get("run_id") or request.query.get("run_uuid"))
        return Response.json(200, {"run": self._run(job)})

    def _created_info(self, run: CreatedRun) -> dict[str, Any]:
        info: dict[str, Any] = {
            "run_id": run.run_id,
            "run_uuid": run.run_id,
            "run_name": run.name,
            "experiment_id": run.experiment_id,
            "user_id": "trialfleet emulator principal",
            "status": run.status,
            "start_time": run.start_time,
            "artifact_uri": self.artifact_uri(run.run_id),
            "lifecycle_stage": "active",
        }
        if run.end_time is not None:
            info["end_time"] = run.end_time
        return info

    def create_run(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        wanted = str(body.get("experiment_id") or "")
        if wanted not in {experiment_id(self.config, name) for name in self._experiment_names()}:
            raise mlflow_error(404, "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with ID {wanted}")
        tags = {str(t["key"]): str(t["value"]) for t in body.get("tags") or []}
        check_tags(tags, set())
        run_id = str(uuid.uuid4())  # Azure ML names a run made through MLflow by a uuid
        start = _integer(body, "start_time", int(time.time() * 1000))
        run = CreatedRun(run_id, wanted, str(body.get("run_name") or run_id), start)
        with self.lock:
            self.created[run_id] = run
            self._data(run_id).tags.update(tags)
        return Response.json(200, {"run": self._run(run)})

    def update_run(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        job = self._job(body.get("run_id") or body.get("run_uuid"))
        with self.lock:
            if "status" in body:
                self._data(_run_id(job)).status_updates.append(str(body["status"]))
                if isinstance(job, CreatedRun):  # a job's run follows its job instead
                    job.status = str(body["status"])
                    if job.status in ("FINISHED", "FAILED", "KILLED"):
                        job.end_time = _integer(body, "end_time", int(time.time() * 1000))
        return Response.json(200, {"run_info": self._run(job)["info"]})

    def log_metric(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        job = self._job(body.get("run_id") or body.get("run_uuid"))
        metric = _metric(body)
        with self.lock:
            data = self._data(_run_id(job))
            check_metric_names([metric], {m["key"] for m in data.metrics})
            data.metrics.append(metric)
        return Response.json(200, {})

    def log_batch(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        job = self._job(body.get("run_id"))
        entities = [body.get(name) or [] for name in ("metrics", "params", "tags")]
        check_batch(len(request.body), *(len(e) for e in entities))
        metrics = [_metric(m) for m in entities[0]]
        params = {str(p["key"]): str(p["value"]) for p in entities[1]}
        tags = {str(t["key"]): str(t["value"]) for t in entities[2]}
        with self.lock:
            data = self._data(_run_id(job))
            check_tags(tags, self._tag_keys(job, data))
            check_metric_names(metrics, {m["key"] for m in data.metrics})
            data.metrics.extend(metrics)
            data.params.update(params)
            data.tags.update(tags)
        return Response.json(200, {})

    def log_parameter(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        job = self._job(body.get("run_id") or body.get("run_uuid"))
        with self.lock:
            self._data(_run_id(job)).params[str(body.get("key"))] = str(body.get("value"))
        return Response.json(200, {})

    def set_tag(self, request: Request, match: re.Match[str]) -> Response:
        body = _body(request)
        job = self._job(body.get("run_id") or body.get("run_uuid"))
        tag = {str(body.get("key")): str(body.get("value"))}
        with self.lock:
            data = self._data(_run_id(job))
            check_tags(tag, self._tag_keys(job, data))
            data.tags.update(tag)
        return Response.json(200, {})

    @staticmethod
    def _tag_keys(job: Job | CreatedRun, data: RunData) -> set[str]:
        """A job's tags are its run's tags (Azure counts them together)."""
        if isinstance(job, CreatedRun):
            return set(data.tags)
        return set(data.tags) | {str(k) for k in job.properties.get("tags") or {}}

    def get_history(self, request: Request, match: re.Match[str]) -> Response:
        job = self._job(request.query.get("run_id") or request.query.get("run_uuid"))
        key = request.query.get("metric_key")
        if not key:
            raise mlflow_error(
                400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'metric_key'."
            )
        history = [m for m in self.metrics(_run_id(job)) if m["key"] == key]
        history.sort(key=lambda m: (m["step"], m["timestamp"]))  # stable: equal steps keep arrival order
        start = int(request.query.get("page_token") or 0)
        size = int(request.query.get("max_results") or 25000)
        page: dict[str, Any] = {"metrics": history[start : start + size]}
        if start + size < len(history):
            page["next_page_token"] = str(start + size)
        return Response.json(200, page)

    def _experiment(self, name: str) -> dict[str, Any]:
        return {
            "experiment": {
                "experiment_id": experiment_id(self.config, name),
                "name": name,
                "artifact_location": "",
                "lifecycle_stage": "active",
                "tags": [],
            }
        }

    def _experiment_names(self) -> set[str]:
        with self.engine.lock:
            names = {str(j.properties.get("experimentName") or "Default") for j in self.engine.jobs.values()}
        with self.lock:
            return names | self.experiments

    def create_experiment(self, request: Request, match: re.Match[str]) -> Response:
        """MLflow's ``experiments/create``: ``{"name"}`` → ``{"experiment_id"}``; a name taken is refused."""
        name = str(_body(request).get("name") or "")
        if not name:
            raise mlflow_error(400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'name'.")
        if name in self._experiment_names():
            raise mlflow_error(400, "RESOURCE_ALREADY_EXISTS", f"Experiment '{name}' already exists.")
        with self.lock:
            self.experiments.add(name)
        return Response.json(200, {"experiment_id": experiment_id(self.config, name)})

    def get_experiment(self, request: Request, match: re.Match[str]) -> Response:
        wanted = request.query.get("experiment_id")
        for name in self._experiment_names():
            if experiment_id(self.config, name) == wanted:
                return Response.json(200, self._experiment(name))
        raise mlflow_error(404, "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with ID {wanted}")

    def get_experiment_by_name(self, request: Request, match: re.Match[str]) -> Response:
        name = request.query.get("experiment_name", "")
        if name not in self._experiment_names():
            raise mlflow_error(
                404, "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name}'"
            )
        return Response.json(200, self._experiment(name))


def _run_id(job: Job | CreatedRun) -> str:
    return job.run_id if isinstance(job, CreatedRun) else job.name


def _body(request: Request) -> dict[str, Any]:
    try:
        body = request.json()
    except HttpError:
        raise mlflow_error(400, "MALFORMED_REQUEST", "The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise mlflow_error(400, "MALFORMED_REQUEST", "The request body must be a JSON object.")
    return body


def _integer(body: dict[str, Any], name: str, default: int | None) -> int:
    """An int64 field; protobuf's JSON mapping may send it as a string of digits."""
    value = body.get(name, default)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise mlflow_error(
            400, "INVALID_PARAMETER_VALUE", f"Invalid value {value!r} for parameter '{name}' supplied."
        )
    return value


def _metric(body: dict[str, Any]) -> dict[str, Any]:
    key, value = body.get("key"), body.get("value")
    if not isinstance(key, str) or not key:
        raise mlflow_error(400, "INVALID_PARAMETER_VALUE", "Missing value for required parameter 'key'.")
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        value = float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise mlflow_error(
            400, "INVALID_PARAMETER_VALUE", f"Invalid value {value!r} for parameter 'value' supplied."
        )
    number = float(value)
    return {
        "key": key,
        "value": number if math.isfinite(number) else str(number),
        "timestamp": _integer(body, "timestamp", None),
        "step": _integer(body, "step", 0),
    }
