"""FrameworkController's completion statuses and retry decisions (``pkg/apis/frameworkcontroller/v1``).

Codes FC defines itself carry its phrase and type; a failed pod no FC pattern recognises completes with the
exit code of its last failed container, phrase ``ContainerUnrecognizedFailed``, type Failed with no attribute
(an *unknown* failure: retried up to the retry count). Transient failures are always retried without counting,
permanent ones never (the fancy retry policy the rest server asks for).
"""

from __future__ import annotations

import json
from typing import Any

from .model import Completion, Task

SUCCEEDED = 0
STOP_FRAMEWORK_REQUESTED = -210
FRAMEWORK_ATTEMPT_COMPLETION = -220

_FC_CODES: dict[int, tuple[str, str, list[str]]] = {
    0: ("Succeeded", "Succeeded", []),
    -100: ("ConfigMapExternalDeleted", "Failed", ["Transient"]),
    -101: ("PodExternalDeleted", "Failed", ["Transient"]),
    -110: ("ConfigMapLocalCacheCreationTimeout", "Failed", ["Transient"]),
    -111: ("PodLocalCacheCreationTimeout", "Failed", ["Transient"]),
    -120: ("PodCreationTransientError", "Failed", ["Transient"]),
    -200: ("PodCreationPermanentError", "Failed", ["Permanent"]),
    -210: ("StopFrameworkRequested", "Failed", ["Permanent"]),
    -220: ("FrameworkAttemptCompletion", "Failed", ["Permanent"]),
    -230: ("DeleteTaskRequested", "Failed", ["Permanent"]),
    -300: ("PodFailedWithoutFailedContainer", "Failed", []),
    -310: ("PodCreationUnknownError", "Failed", []),
}


def of_code(code: int, diagnostics: str, trigger: dict[str, Any] | None = None) -> Completion:
    phrase, type_name, attributes = _FC_CODES[code]
    return Completion(code, phrase, type_name, list(attributes), diagnostics, trigger)


def stop_requested() -> Completion:
    return of_code(STOP_FRAMEWORK_REQUESTED, "User has requested to stop the Framework")


def attempt_completion() -> Completion:
    """What every task still running gets when its framework attempt completes."""
    return of_code(FRAMEWORK_ATTEMPT_COMPLETION, "Stop to complete current FrameworkAttempt")


def pod_completion_status(container_code: int, message: str | None) -> dict[str, Any]:
    """``ExtractPodCompletionStatus`` of a PAI pod: the runtime's init container, then the job's ``app``."""
    app: dict[str, Any] = {"name": "app", "reason": "Completed" if container_code == 0 else "Error"}
    if message:
        app["message"] = message
    app["code"] = container_code
    return {"containers": [{"name": "init", "reason": "Completed", "code": 0}, app]}


def pod_finished(container_code: int, message: str | None) -> Completion:
    status = json.dumps(pod_completion_status(container_code, message), separators=(",", ":"))
    if container_code == 0:
        return of_code(SUCCEEDED, "Pod succeeded")
    return Completion(
        container_code,
        "ContainerUnrecognizedFailed",
        "Failed",
        [],
        f"Pod failed: PodPattern unmatched: {status}",
    )


def failed_trigger(task: Task, failed: int, minimum: int) -> Completion:
    base = task.attempt.completion
    assert base is not None
    message = f"FailedTaskCount {failed} has reached MinFailedTaskCount {minimum} in the TaskRole"
    return _triggered(base, message, task)


def succeeded_trigger(task: Task, succeeded: int, minimum: int) -> Completion:
    base = task.attempt.completion
    assert base is not None
    message = f"SucceededTaskCount {succeeded} has reached MinSucceededTaskCount {minimum} in the TaskRole"
    return _triggered(base, message, task)


def all_completed(last: Task | None, completed: int, total: int) -> Completion:
    diagnostics = (
        f"CompletedTaskCount {completed} has reached TotalTaskCount {total} and no user specified "
        "conditions in FrameworkAttemptCompletionPolicy have ever been triggered"
    )
    trigger = (
        None if last is None else {"message": diagnostics, "taskRoleName": last.role, "taskIndex": last.index}
    )
    return of_code(SUCCEEDED, diagnostics, trigger)


def _triggered(base: Completion, message: str, task: Task) -> Completion:
    trigger = {"message": message, "taskRoleName": task.role, "taskIndex": task.index}
    return Completion(
        base.code, base.phrase, base.type_name, list(base.attributes), base.diagnostics, trigger
    )


def should_retry(completion: Completion, accountable_retried: int, max_retries: int) -> tuple[bool, bool]:
    """(retry, counted): FC's fancy retry policy."""
    if completion.succeeded or "Permanent" in completion.attributes:
        return False, False
    if "Transient" in completion.attributes:
        return True, False
    return max_retries == -1 or accountable_retried < max_retries, True


__all__ = [
    "FRAMEWORK_ATTEMPT_COMPLETION",
    "STOP_FRAMEWORK_REQUESTED",
    "SUCCEEDED",
    "all_completed",
    "attempt_completion",
    "failed_trigger",
    "of_code",
    "pod_completion_status",
    "pod_finished",
    "should_retry",
    "stop_requested",
    "succeeded_trigger",
]
