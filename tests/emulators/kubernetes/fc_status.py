"""FrameworkController's status model: completion codes, pod failure matching, retry decisions, new statuses.

From ``pkg/apis/frameworkcontroller/v1/{completion,funcs,types}.go`` and the default ``podFailureSpec`` of
``example/config/default/frameworkcontroller.yaml``. Status objects are kept in their JSON form, with
Go's ``null`` for unset pointers, exactly as a client reads them.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass
from typing import Any

SUCCEEDED, FAILED = "Succeeded", "Failed"
TRANSIENT, PERMANENT, CONFLICT = "Transient", "Permanent", "Conflict"


@dataclass(frozen=True)
class CodeInfo:
    code: int
    phrase: str
    name: str = FAILED
    attributes: tuple[str, ...] | None = ()
    # container patterns: (reason regex or None, code range (min, max)); a pod pattern: (reason regex or None)
    containers: tuple[tuple[str | None, tuple[int | None, int | None]], ...] = ()
    pod_reason: str | None = None

    def type(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "attributes": list(self.attributes) if self.attributes is not None else None,
        }


def _container(code: int) -> tuple[tuple[str | None, tuple[int | None, int | None]], ...]:
    return ((None, (code, code)),)


PREDEFINED = [
    CodeInfo(200, "ContainerTransientFailed", attributes=(TRANSIENT,), containers=_container(200)),
    CodeInfo(
        201, "ContainerTransientConflictFailed", attributes=(TRANSIENT, CONFLICT), containers=_container(201)
    ),
    CodeInfo(210, "ContainerPermanentFailed", attributes=(PERMANENT,), containers=_container(210)),
    CodeInfo(0, "Succeeded", name=SUCCEEDED),
    CodeInfo(-100, "ConfigMapExternalDeleted", attributes=(TRANSIENT,)),
    CodeInfo(-101, "PodExternalDeleted", attributes=(TRANSIENT,)),
    CodeInfo(-110, "ConfigMapLocalCacheCreationTimeout", attributes=(TRANSIENT,)),
    CodeInfo(-111, "PodLocalCacheCreationTimeout", attributes=(TRANSIENT,)),
    CodeInfo(-120, "PodCreationTransientError", attributes=(TRANSIENT,)),
    CodeInfo(-200, "PodCreationPermanentError", attributes=(PERMANENT,)),
    CodeInfo(-210, "StopFrameworkRequested", attributes=(PERMANENT,)),
    CodeInfo(-220, "FrameworkAttemptCompletion", attributes=(PERMANENT,)),
    CodeInfo(-230, "DeleteTaskRequested", attributes=(PERMANENT,)),
    CodeInfo(-300, "PodFailedWithoutFailedContainer"),
    CodeInfo(-310, "PodCreationUnknownError"),
]

# the default deployment's podFailureSpec, appended after the predefined codes
DEFAULT_POD_FAILURE_SPEC = [
    CodeInfo(-1000, "PodEvicted", attributes=(TRANSIENT,), pod_reason=r"(?i)^Evicted$"),
    CodeInfo(-1001, "PodNodeLost", attributes=(TRANSIENT,), pod_reason=r"(?i)^NodeLost$"),
    CodeInfo(
        -1002, "PodScheduledToInsufficientResourceNode", attributes=(TRANSIENT,), pod_reason=r"(?i)^OutOf\S+$"
    ),
    CodeInfo(-1003, "PodPreemptedForCriticalPod", attributes=(TRANSIENT,), pod_reason=r"(?i)^Preempting$"),
    CodeInfo(-1004, "PodDeadlineExceeded", attributes=(PERMANENT,), pod_reason=r"(?i)^DeadlineExceeded$"),
    CodeInfo(-1005, "PodNodeAdmissionForbidden", attributes=(PERMANENT,), pod_reason=r"(?i)^Forbidden$"),
    CodeInfo(
        -1006,
        "PodNodeAdmissionUnexpectedError",
        attributes=(TRANSIENT,),
        pod_reason=r"(?i)^(UnexpectedAdmissionError|UnknownReason|InvalidNodeInfo|UnexpectedPredicateFailureType)$",
    ),
    CodeInfo(
        -1200,
        "ContainerDockerOOMKilled",
        attributes=(PERMANENT,),
        containers=((r"(?i)^OOMKilled$", (1, None)),),
    ),
    CodeInfo(
        -1201,
        "ContainerDockerCreationError",
        attributes=None,
        containers=((r"(?i)^ContainerCannotRun$", (125, 125)),),
    ),
    CodeInfo(
        -1202,
        "ContainerDockerStartCmdPermissionDenied",
        attributes=(PERMANENT,),
        containers=((r"(?i)^ContainerCannotRun$", (126, 126)),),
    ),
    CodeInfo(
        -1203,
        "ContainerDockerStartCmdNotFound",
        attributes=(PERMANENT,),
        containers=((r"(?i)^ContainerCannotRun$", (127, 127)),),
    ),
    CodeInfo(130, "ContainerSigIntReceived", attributes=(TRANSIENT,), containers=_container(130)),
    CodeInfo(131, "ContainerSigQuitReceived", attributes=(TRANSIENT,), containers=_container(131)),
    CodeInfo(132, "ContainerSigIllReceived", attributes=(PERMANENT,), containers=_container(132)),
    CodeInfo(134, "ContainerSigAbrtReceived", attributes=None, containers=_container(134)),
    CodeInfo(135, "ContainerSigBusReceived", attributes=(PERMANENT,), containers=_container(135)),
    CodeInfo(136, "ContainerSigFpeReceived", attributes=(PERMANENT,), containers=_container(136)),
    CodeInfo(137, "ContainerSigKillReceived", attributes=(TRANSIENT,), containers=_container(137)),
    CodeInfo(139, "ContainerSigSegvReceived", attributes=(PERMANENT,), containers=_container(139)),
    CodeInfo(141, "ContainerSigPipeReceived", attributes=(PERMANENT,), containers=_container(141)),
    CodeInfo(143, "ContainerSigTermReceived", attributes=(TRANSIENT,), containers=_container(143)),
]
CODES = {info.code: info for info in PREDEFINED}


def go_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def completion(code: int, diagnostics: str, **extra: Any) -> dict[str, Any]:
    info = CODES[code]
    return {"code": code, "phrase": info.phrase, "type": info.type(), "diagnostics": diagnostics, **extra}


def _all_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def pod_completion(pod: dict[str, Any]) -> dict[str, Any]:
    """``ExtractPodCompletionStatus``."""
    status = pod.get("status") or {}
    result: dict[str, Any] = {}
    if status.get("reason"):
        result["reason"] = status["reason"]
    if status.get("message"):
        result["message"] = status["message"]
    containers = []
    for container in _all_statuses(pod):
        term = (container.get("state") or {}).get("terminated") or {}
        entry: dict[str, Any] = {"name": container["name"]}
        for key in ("reason", "message", "signal"):
            if term.get(key):
                entry[key] = term[key]
        entry["code"] = term.get("exitCode", 0)
        containers.append(entry)
    if containers:
        result["containers"] = containers
    return result


def _match_container(
    container: dict[str, Any], reason: str | None, codes: tuple[int | None, int | None]
) -> dict | None:
    term = (container.get("state") or {}).get("terminated")
    if term is None:
        return None
    if reason is not None and not re.search(reason, term.get("reason", "")):
        return None
    low, high = codes
    code = term.get("exitCode", 0)
    if (low is not None and code < low) or (high is not None and code > high):
        return None
    matched: dict[str, Any] = {"name": container["name"]}
    if reason is not None:
        matched["reason"] = term.get("reason")
    matched["code"] = code
    return matched


def _match(pod: dict[str, Any], info: CodeInfo) -> dict[str, Any] | None:
    if not info.containers and info.pod_reason is None:
        return None
    matched: dict[str, Any] = {}
    if info.pod_reason is not None:
        found = re.search(info.pod_reason, (pod.get("status") or {}).get("reason") or "")
        if found is None:
            return None
        matched["reason"] = found.group(0)
    for reason, codes in info.containers:
        hit = next((m for c in _all_statuses(pod) if (m := _match_container(c, reason, codes))), None)
        if hit is None:
            return None
        matched.setdefault("containers", []).append(hit)
    return matched


def match_failed_pod(pod: dict[str, Any], spec: list[CodeInfo]) -> tuple[int, str, dict[str, Any], str]:
    """``MatchCompletionCodeInfos``: (code, phrase, type, diagnostics) of a failed pod."""
    for info in [*PREDEFINED, *spec]:
        matched = _match(pod, info)
        if matched is not None:
            return info.code, info.phrase, info.type(), f"PodPattern matched: {go_json(matched)}"
    unmatched = f"PodPattern unmatched: {go_json(pod_completion(pod))}"
    failed = [
        (t.get("finishedAt", ""), t["exitCode"])
        for c in _all_statuses(pod)
        if (t := (c.get("state") or {}).get("terminated")) and t.get("exitCode")
    ]
    if not failed:
        info = CODES[-300]
        return info.code, info.phrase, info.type(), unmatched
    return max(failed)[1], "ContainerUnrecognizedFailed", {"name": FAILED, "attributes": []}, unmatched


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    accountable: bool
    delay: int
    reason: str


def should_retry(
    policy: dict[str, Any],
    retried: dict[str, Any],
    status: dict[str, Any],
    conflict_delay: tuple[int, int] = (0, 0),
) -> RetryDecision:
    code, kind = status["code"], status["type"]
    failed = kind["name"] == FAILED
    attributes = kind.get("attributes") or []
    if code in (-210, -220, -230):
        return RetryDecision(False, True, 0, f"CompletionCode is {code}, {status['phrase']}")
    if policy.get("fancyRetryPolicy") and failed:
        reason = f"FancyRetryPolicy is true and CompletionType is {kind}"
        if TRANSIENT in attributes:
            delay = random.randint(*conflict_delay) if CONFLICT in attributes else 0
            return RetryDecision(True, False, delay, reason)
        if PERMANENT in attributes:
            return RetryDecision(False, True, 0, reason)
    limit = policy.get("maxRetryCount", 0)
    count = retried.get("accountableRetriedCount", 0)
    if limit == -2 or (failed and (limit == -1 or count < limit)):
        return RetryDecision(
            True, True, 0, f"AccountableRetriedCount {count} has not reached MaxRetryCount {limit}"
        )
    if not failed:
        return RetryDecision(False, True, 0, f"CompletionType is {kind}")
    return RetryDecision(False, True, 0, f"AccountableRetriedCount {count} has reached MaxRetryCount {limit}")


# ---- new statuses -----------------------------------------------------------------------------------------


def _retry_status() -> dict[str, Any]:
    return {"totalRetriedCount": 0, "accountableRetriedCount": 0, "retryDelaySec": None}


def task_attempt(framework: str, role: str, index: int, attempt: int, now: str) -> dict[str, Any]:
    return {
        "id": attempt,
        "startTime": now,
        "runTime": None,
        "completionTime": None,
        "instanceUID": None,
        "podName": f"{framework}-{role}-{index}",
        "podUID": None,
        "podNodeName": None,
        "podIP": None,
        "podHostIP": None,
        "completionStatus": None,
    }


def task_status(framework: str, role: str, index: int, now: str) -> dict[str, Any]:
    return {
        "index": index,
        "instanceUID": str(uuid.uuid4()),
        "startTime": now,
        "runTime": None,
        "completionTime": None,
        "state": "AttemptCreationPending",
        "transitionTime": now,
        "deletionPending": False,
        "retryPolicyStatus": _retry_status(),
        "attemptStatus": task_attempt(framework, role, index, 0, now),
    }


def framework_attempt(framework: dict[str, Any], attempt: int, now: str) -> dict[str, Any]:
    name = framework["metadata"]["name"]
    roles = [
        {
            "name": role["name"],
            "instanceUID": str(uuid.uuid4()),
            "podGracefulDeletionTimeoutSec": None,
            "taskStatuses": [
                task_status(name, role["name"], i, now) for i in range(role.get("taskNumber", 0))
            ],
        }
        for role in (framework.get("spec") or {}).get("taskRoles") or []
    ]
    return {
        "id": attempt,
        "startTime": now,
        "runTime": None,
        "completionTime": None,
        "instanceUID": None,
        "configMapName": f"{name}-attempt",
        "configMapUID": None,
        "completionStatus": None,
        "taskRoleStatuses": roles,
    }


def framework_status(framework: dict[str, Any], now: str) -> dict[str, Any]:
    return {
        "startTime": now,
        "runTime": None,
        "completionTime": None,
        "state": "AttemptCreationPending",
        "transitionTime": now,
        "retryPolicyStatus": _retry_status(),
        "attemptStatus": framework_attempt(framework, 0, now),
    }


def transition_framework(status: dict[str, Any], state: str, now: str) -> None:
    if status["state"] == state:
        return
    if state == "AttemptRunning":
        status["attemptStatus"]["runTime"] = now
        status["runTime"] = status["runTime"] or now
    if state == "AttemptCompleted":
        status["attemptStatus"]["completionTime"] = now
    if state == "Completed":
        status["completionTime"] = now
    status["state"] = state
    status["transitionTime"] = now


def transition_task(task: dict[str, Any], state: str, now: str) -> None:
    if task["state"] == state:
        return
    if state == "AttemptRunning":
        task["attemptStatus"]["runTime"] = now
        task["runTime"] = task["runTime"] or now
    if state == "AttemptCompleted":
        task["attemptStatus"]["completionTime"] = now
    if state == "Completed":
        task["completionTime"] = now
    task["state"] = state
    task["transitionTime"] = now
