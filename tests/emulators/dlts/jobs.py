"""The ``jobs`` table of one cluster, the rows' views the RestAPI returns, and who may see or change a job.

Field names and shapes follow ``MySQLDataHandler`` (``GetJob``, ``GetJobV2``, ``get_union_job_list``) and
``dlwsrestapi.py``: ``jobParams`` and ``jobStatusDetail`` decoded, ``jobTime`` as Flask writes a ``DATETIME``,
credentials of plugins removed.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.emulators.dlts.clock import http_date
from tests.emulators.dlts.config import EmulatorConfig
from tests.emulators.dlts.joblog import JobLog

ACTIVE_STATUS = frozenset({"unapproved", "queued", "scheduling", "running", "pausing", "paused"})
TERMINAL_STATUS = frozenset({"finished", "failed", "error", "killed"})
# varchar columns of the jobs table; MySQL in strict mode refuses longer values
_COLUMN_LIMITS = {
    "jobId": 50,
    "familyToken": 50,
    "jobName": 1024,
    "userName": 255,
    "vcName": 255,
    "jobType": 255,
}
_REQUIRED_COLUMNS = ("jobId", "familyToken", "isParent", "jobName", "userName", "vcName", "jobType")


@dataclass
class Job:
    params: dict[str, Any]
    job_time: float
    status: str = "unapproved"
    detail: list[dict[str, Any]] | None = None
    error_msg: str | None = None
    endpoints: dict[str, dict[str, Any]] | None = None
    priority: int | None = None  # a row of the job priority table, when one was set
    entered_at: float = 0.0
    seen: bool = False  # a client has read the current status
    history: list[tuple[str, float]] = field(default_factory=list)
    log: JobLog = field(default_factory=JobLog)
    log_cursor: str | None = None  # jobLogCursor: where the job log manager's last extraction stopped
    launch_failures: int = 0
    run: Any = None  # the running pod (tests.emulators.dlts.launch.Pod) while there is one

    @property
    def job_id(self) -> str:
        return str(self.params["jobId"])

    @property
    def user_name(self) -> str:
        return str(self.params["userName"])

    @property
    def vc_name(self) -> str:
        return str(self.params["vcName"])

    @property
    def job_type(self) -> str:
        return str(self.params["jobType"])


def _remove_creds(params: dict[str, Any]) -> dict[str, Any]:
    params = copy.deepcopy(params)
    plugins = params.get("plugins")
    if isinstance(plugins, dict):
        for name, keys in (
            ("blobfuse", ("accountName", "accountKey")),
            ("imagePull", ("username", "password")),
        ):
            entries = plugins.get(name)
            if isinstance(entries, list):
                for entry in entries:
                    for key in keys:
                        if isinstance(entry, dict):
                            entry.pop(key, None)
    return params


def detail_v2(job: Job) -> dict[str, Any]:
    """``GetJobDetailV2``: the columns of ``GetJobV2``."""
    return {
        "insight": None,
        "jobId": job.job_id,
        "jobName": job.params["jobName"],
        "jobParams": _remove_creds(job.params),
        "jobStatus": job.status,
        "jobStatusDetail": copy.deepcopy(job.detail),
        "jobTime": http_date(job.job_time),
        "jobType": job.params["jobType"],
        "userName": job.user_name,
        "vcName": job.vc_name,
    }


def detail_v1(job: Job, log: str) -> dict[str, Any]:
    """``GetJobDetail``: the columns of ``GetJob`` without ``jobDescription`` and ``jobMeta``, plus ``log``."""
    return {
        **list_record_v1(job),
        "familyToken": job.params["familyToken"],
        "isParent": job.params["isParent"],
        "log": log,
    }


def list_record_v1(job: Job) -> dict[str, Any]:
    """A job of ``ListJobs`` (``get_union_job_list`` columns)."""
    return {
        "endpoints": copy.deepcopy(job.endpoints) if job.endpoints else None,
        "errorMsg": job.error_msg,
        "jobDescriptionPath": None,
        "jobId": job.job_id,
        "jobName": job.params["jobName"],
        "jobParams": _remove_creds(job.params),
        "jobStatus": job.status,
        "jobStatusDetail": copy.deepcopy(job.detail),
        "jobTime": http_date(job.job_time),
        "jobType": job.params["jobType"],
        "userName": job.user_name,
        "vcName": job.vc_name,
    }


def list_record_v2(job: Job) -> dict[str, Any]:
    """A job of ``ListJobsV2`` (``get_union_job_list_v2`` columns)."""
    record = detail_v2(job)
    del record["insight"]
    record["priority"] = job.priority if job.priority is not None else 100
    return dict(sorted(record.items()))


def can_read(config: EmulatorConfig, email: str, job: Job) -> bool:
    """Detail and log: the owner (exact match) or a Collaborator of the job's VC."""
    return job.user_name == email or config.has_access(email, job.vc_name, "Collaborator")


def can_operate(config: EmulatorConfig, email: str, job: Job) -> bool:
    """``get_access_to_job`` for kill/pause/resume/approve: the owner (any case) or an Admin of the VC."""
    return job.user_name.lower() == email.lower() or config.has_access(email, job.vc_name, "Admin")


def can_expose(config: EmulatorConfig, email: str, job: Job) -> bool:
    """Endpoints: the owner (exact match) or an Admin of the VC."""
    return job.user_name == email or config.has_access(email, job.vc_name, "Admin")


class JobTable:
    """The rows of one cluster's ``jobs`` table, in insertion order. Callers hold :attr:`lock`."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._rows: dict[str, Job] = {}

    def add(self, params: dict[str, Any], now: float) -> bool:
        """``DataHandler.AddJob``: False where the INSERT would fail (missing or oversized column, duplicate id)."""
        try:
            row = {key: params[key] for key in _REQUIRED_COLUMNS}
            json.dumps(params)
        except (KeyError, TypeError, ValueError):
            return False
        for key, value in row.items():
            if isinstance(value, dict | list) or value is None:
                return False
            if key in _COLUMN_LIMITS and len(str(value)) > _COLUMN_LIMITS[key]:
                return False
        if not _is_int_like(row["isParent"]) or str(row["jobId"]) in self._rows:
            return False
        job = Job(params=copy.deepcopy(params), job_time=float(int(now)), entered_at=now)
        job.history.append(("unapproved", now))
        self._rows[job.job_id] = job
        return True

    def get(self, job_id: str) -> Job | None:
        return self._rows.get(job_id)

    def remove(self, job_id: str) -> Job | None:
        return self._rows.pop(job_id, None)

    def all(self) -> list[Job]:
        return list(self._rows.values())

    def union_list(self, email: str, vc_name: str, everyone: bool, num: int) -> list[Job]:
        """``get_union_job_list``: every active job, then the latest ``num`` others, newest first."""
        rows = [j for j in self._rows.values() if (everyone or j.user_name == email) and j.vc_name == vc_name]
        newest = sorted(rows, key=lambda j: j.job_time, reverse=True)
        active = [j for j in newest if j.status in ACTIVE_STATUS]
        others = [j for j in newest if j.status not in ACTIVE_STATUS][: max(num, 0)]
        return active + others


def _is_int_like(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True


__all__ = [
    "ACTIVE_STATUS",
    "TERMINAL_STATUS",
    "Job",
    "JobTable",
    "can_expose",
    "can_operate",
    "can_read",
    "detail_v1",
    "detail_v2",
    "list_record_v1",
    "list_record_v2",
]
