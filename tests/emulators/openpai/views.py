"""The rest server's answers built from a framework's status: ``models/v2/job/k8s.js`` and
``models/v2/utils/frameworkConverter.js`` transcribed.

Times are epoch milliseconds of Kubernetes timestamps, which have whole seconds. Keys the rest server reads from a
status field that is absent (the placeholder written at submit time has no attempt id) are left out, as
``JSON.stringify`` leaves out ``undefined``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import exit_spec
from .config import ClusterConfig
from .env import hashed_ports
from .errors import not_found
from .jscompat import UNDEFINED, load_yaml, number
from .model import Attempt, Completion, Framework, RoleSpec, Task, TaskAttempt
from .yamldump import dump as yaml_dump

_DELETING = ("AttemptDeletionPending", "AttemptDeletionRequested", "AttemptDeleting")


def ms(seconds: float | None) -> int | None:
    return int(seconds) * 1000 if seconds else None


def convert_state(state: str | None, code: int | None) -> str:
    if state in ("AttemptCreationPending", "AttemptCreationRequested", "AttemptPreparing"):
        return "WAITING"
    if state == "AttemptRunning":
        return "RUNNING"
    if state in (*_DELETING, "AttemptCompleted"):
        return "STOPPING" if code in (-210, -220) else "RUNNING"
    if state == "Completed":
        return "SUCCEEDED" if code == 0 else "STOPPED" if code in (-210, -220) else "FAILED"
    return "UNKNOWN"


def convert_attempt_state(state: str | None, code: int | None) -> str:
    if state in ("AttemptCreationPending", "AttemptCreationRequested", "AttemptPreparing"):
        return "WAITING"
    if state == "AttemptRunning":
        return "RUNNING"
    if state in _DELETING:
        return "STOPPING" if code in (-210, -220) else "RUNNING"
    if state in ("AttemptCompleted", "Completed"):
        return "SUCCEEDED" if code == 0 else "STOPPED" if code in (-210, -220) else "FAILED"
    return "UNKNOWN"


def _runtime_output(status: dict[str, Any]) -> dict[str, Any] | None:
    for container in status.get("containers") or []:
        if container.get("code", 0) <= 0 or container.get("message") is None:
            continue
        message = container["message"]
        start, end = message.find("[PAI_RUNTIME_ERROR_START]"), message.find("[PAI_RUNTIME_ERROR_END]")
        if start < 0 or end < 0:
            continue
        try:
            loaded = load_yaml(message[start + len("[PAI_RUNTIME_ERROR_START]") : end].strip())
            return {**(loaded if isinstance(loaded, dict) else {}), "name": container["name"]}
        except Exception:  # the rest server logs a warning and reports no runtime output
            return None
    return None


def exit_diagnostics(diagnostics: str | None) -> dict[str, Any] | None:
    """``generateExitDiagnostics``: a pod status after ``matched:`` is re-dumped as YAML."""
    if not diagnostics:
        return None
    result: dict[str, Any] = {"diagnosticsSummary": diagnostics, "runtime": None, "launcher": diagnostics}
    match = re.search(r"matched: ([^\n\r\u2028\u2029]*)", diagnostics)
    if match is None:
        return result
    try:
        status = json.loads(match.group(1))
    except ValueError:
        return result
    summary = diagnostics[: match.start() + len("matched:")] + "\n" + yaml_dump(status)
    result["diagnosticsSummary"] = result["launcher"] = summary
    runtime = _runtime_output(status) if status else None
    if runtime is not None:
        result["runtime"] = runtime
        result["launcher"] = None
    return result


def _code(completion: Completion | None) -> int | None:
    return completion.code if completion is not None else None


def summary(fw: Framework) -> dict[str, Any]:
    """``convertFrameworkSummary``: one row of ``GET /api/v2/jobs``."""
    code = _code(fw.attempt.completion) if fw.attempt else None
    return {
        "debugId": fw.debug_id,
        "name": fw.job_name,
        "username": fw.user,
        "state": convert_state(fw.state, code),
        "subState": fw.state,
        "executionType": fw.execution_type.upper(),
        "tags": list(fw.tags),
        "retries": fw.total_retried,
        "retryDetails": {
            "user": fw.accountable_retried,
            "platform": fw.total_retried - fw.accountable_retried,
            "resource": 0,
        },
        "retryDelayTime": None,
        "submissionTime": ms(fw.submission_time),
        "createdTime": ms(fw.creation_time),
        "launchedTime": ms(fw.run_time or fw.completion_time),
        "completedTime": ms(fw.completion_time),
        "appExitCode": code,
        "virtualCluster": fw.virtual_cluster,
        "totalGpuNumber": fw.total_gpu(),
        "totalTaskNumber": fw.total_tasks(),
        "totalTaskRoleNumber": len(fw.roles),
        "jobPriority": None,
    }


def container_ports(role: RoleSpec, pod_uid: str | None, config: ClusterConfig) -> dict[str, str]:
    if not pod_uid:
        return {}
    start, end = config.schedule_port_start, config.schedule_port_end
    return {
        label: ",".join(hashed_ports(pod_uid, label, count, start, end))
        for label, count in role.ports.items()
    }


def log_path(fw: Framework, attempt_id: int | None, role: str, index: int, task_attempt: int) -> str:
    return f"/api/v2/jobs/{fw.name}/attempts/{attempt_id}/taskRoles/{role}/taskIndex/{index}/attempts/{task_attempt}/logs"


def _exit_fields(completion: Completion | None) -> dict[str, Any]:
    diagnostics = exit_diagnostics(completion.diagnostics) if completion else None
    return {
        "containerExitCode": _code(completion),
        "containerExitSpec": exit_spec.generate(_code(completion)),
        "containerExitDiagnostics": diagnostics["diagnosticsSummary"] if diagnostics else None,
    }


def task_status(fw: Framework, attempt: Attempt, task: Task, config: ClusterConfig) -> dict[str, Any]:
    """``convertTaskDetail`` of ``k8s.js``: one task in the job detail."""
    pod = task.attempt
    code = _code(pod.completion)
    exit_fields = _exit_fields(pod.completion)
    return {
        "taskIndex": task.index,
        "taskUid": task.instance_uid,
        "taskState": convert_state(task.state, code),
        "containerId": pod.pod_uid,
        "containerIp": pod.pod_host_ip,
        "containerNodeName": pod.pod_node_name,
        "containerPorts": container_ports(fw.role(task.role), pod.pod_uid, config),
        "containerGpus": None,
        "containerLog": log_path(fw, attempt.id, task.role, task.index, pod.id),
        **exit_fields,
        "retries": task.total_retried,
        "accountableRetries": task.accountable_retried,
        "createdTime": ms(task.start_time),
        "launchedTime": ms(task.run_time or task.completion_time),
        "completedTime": ms(task.completion_time),
        "attemptId": pod.id,
        "attemptState": convert_attempt_state(task.state, code),
        "currentAttemptCreatedTime": ms(pod.start_time),
        "currentAttemptLaunchedTime": ms(pod.run_time or pod.completion_time),
        "currentAttemptCompletedTime": ms(pod.completion_time),
    }


def _specified(fw: Framework, attempt_id: float | None) -> tuple[Attempt | None, str]:
    """The attempt a detail is asked for, with the framework state of its snapshot (``job.get`` of k8s.js)."""
    latest = fw.attempt
    if (
        attempt_id is None or latest is None or attempt_id != attempt_id
    ):  # absent, placeholder or NaN: the latest
        return latest, fw.state
    if attempt_id < latest.id:
        old = next((a for a in fw.history if a.id == attempt_id), None)
        if old is None:
            raise not_found("NoJobError", f"JobAttemptId {number(attempt_id)} is not found in {fw.name}.")
        return old, old.state
    if attempt_id > latest.id:
        raise not_found("NoJobError", f"JobAttemptId {number(attempt_id)} is not found in {fw.name}.")
    return latest, fw.state


def _attempt_status(attempt: Attempt | None, state: str) -> dict[str, Any]:
    if attempt is None:  # the placeholder status: no id, no times
        return {
            "attemptId": UNDEFINED,
            "attemptState": convert_attempt_state(state, None),
            "appId": UNDEFINED,
        }
    return {
        "attemptId": attempt.id,
        "attemptState": convert_attempt_state(state, _code(attempt.completion)),
        "appId": attempt.instance_uid,
    }


def _app_exit(completion: Completion | None) -> dict[str, Any]:
    diagnostics = exit_diagnostics(completion.diagnostics) if completion else None
    trigger = completion.trigger if completion else None
    return {
        "appExitCode": _code(completion),
        "appExitSpec": exit_spec.generate(_code(completion)),
        "appExitDiagnostics": diagnostics["diagnosticsSummary"] if diagnostics else None,
        "appExitMessages": (
            {"container": None, "runtime": diagnostics["runtime"], "launcher": diagnostics["launcher"]}
            if diagnostics
            else None
        ),
        "appExitTriggerMessage": trigger["message"] if trigger else None,
        "appExitTriggerTaskRoleName": trigger["taskRoleName"] if trigger else None,
        "appExitTriggerTaskIndex": trigger["taskIndex"] if trigger else None,
        "appExitType": completion.type_name if completion else None,
    }


def detail(fw: Framework, config: ClusterConfig, attempt_id: float | None = None) -> dict[str, Any]:
    """``convertFrameworkDetail``: ``GET /api/v2/jobs/{user}~{job}[/attempts/{id}]``."""
    attempt, state = _specified(fw, attempt_id)
    latest_code = _code(fw.attempt.completion) if fw.attempt else None
    completion = attempt.completion if attempt else None
    job_status = {
        "username": fw.user,
        "state": convert_state(fw.state, latest_code),
        "subState": fw.state,
        "executionType": fw.execution_type.upper(),
        "retries": fw.total_retried,
        "retryDetails": {
            "user": fw.accountable_retried,
            "platform": fw.total_retried - fw.accountable_retried,
            "resource": 0,
        },
        "retryDelayTime": None,
        "createdTime": ms(fw.creation_time),
        "launchedTime": ms(fw.run_time or fw.completion_time),
        "completedTime": ms(fw.completion_time),
        **_attempt_status(attempt, state),
        "appProgress": 1 if completion else 0,
        "appTrackingUrl": "",
        "appCreatedTime": ms(attempt.start_time) if attempt else None,
        "appLaunchedTime": ms(attempt.run_time or attempt.completion_time) if attempt else None,
        "appCompletedTime": ms(attempt.completion_time) if attempt else None,
        **_app_exit(completion),
        "virtualCluster": fw.virtual_cluster,
        "submissionTime": ms(fw.submission_time),
    }
    task_roles = {}
    for role, tasks in (attempt.tasks if attempt else {}).items():
        statuses = [task_status(fw, attempt, task, config) for task in tasks]  # type: ignore[arg-type]
        task_roles[role] = {"taskRoleStatus": {"name": role}, "taskStatuses": statuses}
    return {
        "debugId": fw.debug_id,
        "name": fw.job_name,
        "tags": list(fw.tags),
        "jobPriority": UNDEFINED,
        "jobStatus": job_status,
        "taskRoles": task_roles,
    }


def _task_attempt(
    fw: Framework, attempt: Attempt, task: Task, state: str, pod: TaskAttempt, config: ClusterConfig
) -> dict[str, Any]:
    """``convertTaskAttempt``: one entry of a task's attempt list."""
    return {
        "attemptId": pod.id,
        "attemptState": convert_attempt_state(state, _code(pod.completion)),
        "currentAttemptCreatedTime": ms(pod.start_time),
        "currentAttemptLaunchedTime": ms(pod.run_time or pod.completion_time),
        "currentAttemptCompletedTime": ms(pod.completion_time),
        "containerId": pod.pod_uid,
        "containerIp": pod.pod_host_ip,
        "containerNodeName": pod.pod_node_name,
        "containerPorts": container_ports(fw.role(task.role), pod.pod_uid, config),
        "containerGpus": None,
        "containerLog": log_path(fw, attempt.id, task.role, task.index, pod.id),
        **_exit_fields(pod.completion),
    }


def find_task(fw: Framework, name: str, attempt_id: float, role: str, index: float) -> tuple[Attempt, Task]:
    """``task.get`` of the rest server, with its messages (one without a final period)."""
    attempt = fw.attempt
    latest = attempt.id if attempt else None
    if latest is not None and attempt_id < latest:
        attempt = next((a for a in fw.history if a.id == attempt_id), None)
        if attempt is None:
            message = f"Job attempt not found in job {name} with jobAttemptIndex {number(attempt_id)}."
            raise not_found("NoJobError", message)
    elif latest is not None and attempt_id > latest:
        raise not_found(
            "NoJobError", f"Job attempt not found in job {name} with jobAttemptIndex {number(attempt_id)}"
        )
    task = next((t for t in (attempt.tasks.get(role, []) if attempt else []) if t.index == index), None)
    if attempt is None or task is None:
        message = (
            f"Task not found in Job {name} with jobAttemptIndex {number(attempt_id)}, "
            f"taskRoleName {role} and taskIndex {number(index)}."
        )
        raise not_found("NoJobError", message)
    return attempt, task


def task_detail(fw: Framework, attempt: Attempt, task: Task, config: ClusterConfig) -> dict[str, Any]:
    """``convertToTaskDetail``: ``GET .../taskRoles/{role}/taskIndex/{i}/attempts``."""
    code = _code(task.attempt.completion)
    attempts = [_task_attempt(fw, attempt, task, task.state, task.attempt, config)]
    attempts += [_task_attempt(fw, attempt, task, state, pod, config) for state, pod in task.history]
    return {
        "username": fw.user,
        "jobName": fw.job_name,
        "jobAttemptId": attempt.id,
        "taskRoleName": task.role,
        "taskIndex": task.index,
        "taskUid": task.instance_uid,
        "taskState": convert_state(task.state, code),
        "retries": task.total_retried,
        "accountableRetries": task.accountable_retried,
        "createdTime": ms(task.start_time),
        "launchedTime": ms(task.run_time or task.completion_time),
        "completedTime": ms(task.completion_time),
        "attempts": attempts,
    }
