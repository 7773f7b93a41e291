"""The backend's ``SubmitJob`` (``src/utils/JobRestAPIUtils.py``), rule by rule and in its order.

It answers ``{"jobId": ...}`` or ``{"error": ...}``; ``PostJob`` then prefixes errors with "Cannot create job!" and
the dashboard forwards the text with HTTP 200. Where the real code raises (``.strip()`` of a number, ``int("x")``,
a missing key it indexes), Flask answers 500 and so does the dashboard: :class:`BackendFailure`.
"""

from __future__ import annotations

import posixpath
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.emulators.dlts.config import EmulatorConfig, alias_of

DEFAULT_JOB_PRIORITY = 100
PRIORITY_RANGES = {"User": (100, 200), "Admin": (1, 1000)}


class BackendFailure(Exception):
    """The RestAPI raised, so Flask answered 500."""


@dataclass
class SubmitContext:
    config: EmulatorConfig
    now: float
    add_job: Callable[[dict[str, Any]], bool]  # DataHandler.AddJob: False when the row cannot be inserted
    set_priority: Callable[[str, int], None]
    new_uuid: Callable[[], str] = field(default=lambda: str(uuid.uuid4()))


def _strip(value: Any) -> str:
    if not isinstance(value, str):
        raise BackendFailure(f"'{type(value).__name__}' object has no attribute 'strip'")
    return value.strip()


def to_bool(value: Any) -> Any:
    """``ToBool``: digit strings, "true"/"false" in any case, ints; anything else raises (a 500)."""
    if isinstance(value, str):
        if value.isdigit():
            return int(value) != 0
        if value.upper() in ("TRUE", "FALSE"):
            return value.upper() == "TRUE"
        raise BackendFailure(f"ToBool: {value!r}")
    if isinstance(value, int):
        return value != 0
    return value


def _to_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise BackendFailure(str(error)) from error


def _path_error(value: str, what: str) -> str | None:
    if ".." in value:
        return f"ERROR: '..' cannot be used in {what} directory"
    if "\\." in value:
        return f"ERROR: invalided {what} directory"
    if value.startswith("/") or value.startswith("\\"):
        return f"ERROR: {what} directory should not start with '/' or '\\' "
    return None


def _normalize(path: str) -> str:
    """``os.path.realpath(os.path.join("/", p))[1:]`` after turning backslashes into slashes."""
    return posixpath.normpath(posixpath.join("/", path.replace("\\", "/")))[1:]


def _check_names(params: dict[str, Any]) -> str | None:
    if "jobName" not in params or not _strip(params["jobName"]):
        return "ERROR: Job name cannot be empty"
    if "vcName" not in params or not _strip(params["vcName"]):
        return "ERROR: VC name cannot be empty"
    if params.get("jobtrainingtype") == "PSDistJob":
        try:
            workers = int(params.get("numpsworker", ""))
        except (TypeError, ValueError):
            workers = 0
        if workers == 0:
            return "ERROR: Invalid numpsworker value"
    return None


def _fill_defaults(params: dict[str, Any], ctx: SubmitContext, uniq: str) -> None:
    if "userId" not in params or not _strip(params["userId"]):
        user = ctx.config.user(params["userName"])
        params["userId"] = user.uid if user is not None else -1  # IdentityManager's INVALID_INFO
    params["preemptionAllowed"] = (
        to_bool(params["preemptionAllowed"]) if "preemptionAllowed" in params else False
    )
    if "jobId" not in params or params["jobId"] == "":
        params["jobId"] = uniq
    gpus = params.setdefault("resourcegpu", 0)
    if isinstance(gpus, str):
        params["resourcegpu"] = _to_int(gpus) if gpus.strip() else 0
    _populate_resources(params, ctx.config)
    if "familyToken" not in params or str(params["familyToken"]).isspace():
        params["familyToken"] = uniq
    params.setdefault("isParent", 1)


def _populate_resources(params: dict[str, Any], config: EmulatorConfig) -> None:
    """``populate_job_resource`` with the default resource policy; any failure leaves the params as they were."""
    team = config.team(str(params.get("vcName", "")).strip())
    if team is None or params.get("jobtrainingtype") not in ("RegularJob", "PSDistJob", "InferenceJob"):
        return
    try:
        gpus = int(params.get("gpu_limit", params.get("resourcegpu", 0)))
    except (TypeError, ValueError):
        return
    if params["jobtrainingtype"] == "PSDistJob":
        gpus = team.gpus_per_node  # PSDistJobParams: workers take whole nodes
    params["sku"] = params.get("sku") or team.sku
    params["gpuType"] = team.gpu_type
    params["resourcegpu"] = gpus
    params.setdefault("cpurequest", "1000m")
    params.setdefault("cpulimit", 24)
    params.setdefault("memoryrequest", "0Mi")
    params.setdefault("memorylimit", "224Gi")


def _place_paths(params: dict[str, Any], alias: str, now: float) -> tuple[str | None, str]:
    """Job, work and data paths under the user's alias; returns (error, the job path the tensorboard job gets)."""
    if "jobPath" in params and _strip(params["jobPath"]):
        job_path = params["jobPath"]
        error = _path_error(job_path, "job")
        if error:
            return error, job_path
        if not job_path.startswith(alias):
            params["jobPath"] = posixpath.join(alias, job_path)
    else:
        job_path = f"{alias}/jobs/{time.strftime('%y%m%d', time.gmtime(now))}/{params['jobId']}"
        params["jobPath"] = job_path
    for key, what, under_alias in (("workPath", "work", True), ("dataPath", "data", False)):
        if key not in params or not _strip(params[key]):
            params[key] = "."
        error = _path_error(params[key], what)
        if error:
            return error, job_path
        if under_alias and not params[key].startswith(alias):
            params[key] = posixpath.join(alias, params[key])
    for key in ("dataPath", "workPath", "jobPath"):
        params[key] = _normalize(params[key])
    return None, job_path


def _tensorboard_params(params: dict[str, Any], job_path: str, uniq: str) -> dict[str, Any]:
    board = dict(params)
    if board["jobtrainingtype"] == "PSDistJob":
        board["jobtrainingtype"] = "RegularJob"
        match = re.match("(.*)(/.*)", board["logDir"])
        if match is not None and re.match(".*/worker0", match.group(1)) is None:
            board["logDir"] = match.group(1) + "/worker0" + match.group(2)
    board.update(
        jobId=uniq,
        jobName="tensorboard-" + params["jobName"],
        jobPath=job_path,
        jobType="visualization",
        cmd="tensorboard --logdir " + board["logDir"] + " --host 0.0.0.0",
        image=params["image"],
        resourcegpu=0,
        interactivePort="6006",
    )
    return board


def _job_priority(params: dict[str, Any], config: EmulatorConfig) -> int:
    try:
        priority = int(params["jobPriority"])
    except (TypeError, ValueError):
        priority = DEFAULT_JOB_PRIORITY
    admin = config.has_access(params["userName"], params["vcName"].strip(), "Admin")
    low, high = PRIORITY_RANGES["Admin" if admin else "User"]
    return min(max(priority, low), high)


def submit_job(params: dict[str, Any], ctx: SubmitContext) -> dict[str, Any]:
    """``SubmitJob``: ``{"jobId": id}`` or ``{"error": message}``; raises :class:`BackendFailure` for a 500."""
    params = dict(params)
    error = _check_names(params)
    if error:
        return {"error": error}
    uniq = ctx.new_uuid()
    _fill_defaults(params, ctx, uniq)
    alias = alias_of(params["userName"])
    if not ctx.config.has_access(params["userName"], params["vcName"].strip(), "User"):
        return {"error": "Access Denied!"}
    params.setdefault("cmd", "")
    error, job_path = _place_paths(params, alias, ctx.now)
    if error:
        return {"error": error}
    if "logDir" in params and _strip(params["logDir"]):
        try:
            board = _tensorboard_params(params, job_path, uniq)
        except KeyError as missing:
            raise BackendFailure(f"KeyError: {missing}") from missing
        if not ctx.add_job(board):
            return {"error": "Cannot schedule tensorboard job."}
    if not ctx.add_job(params):
        return {"error": "Cannot schedule job. Cannot add job into database."}
    if "jobPriority" in params:
        ctx.set_priority(str(params["jobId"]), _job_priority(params, ctx.config))
    return {"jobId": params["jobId"]}


__all__ = ["DEFAULT_JOB_PRIORITY", "BackendFailure", "SubmitContext", "submit_job", "to_bool"]
