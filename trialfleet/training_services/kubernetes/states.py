"""What each operator's status says, in trialfleet's terms: one pure function per kind, and what pods tell.

* Kubeflow (TFJob, PyTorchJob): the conditions, in the order the operator writes them. It appends each new
  condition at the end and turns ``Running`` to ``False`` when the job finishes, so the last condition whose
  status is ``True`` is the job's state: ``Created`` → ``Running`` (↔ ``Restarting``) → ``Succeeded`` | ``Failed``.
* FrameworkController: ``status.state``, and once ``Completed`` the attempt's completion code, whose type says
  ``Failed`` for a stop (-210) too: the code tells a cancel from a failure.
* AdaptDL: ``status.phase``; ``Stopping`` → ``Pending`` is a rescale, not an end.
* Pods: an image that cannot be pulled, an OOM kill, an eviction, a lost node — the platform's doing, so
  infrastructure failures that the retry policy may run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialfleet.status import FailureKind, TrialStatus

INFRA, USER = FailureKind.INFRASTRUCTURE, FailureKind.USER_CODE
WAITING, RUNNING = TrialStatus.WAITING, TrialStatus.RUNNING


@dataclass(frozen=True)
class JobState:
    """A trial's custom resource as its operator reports it."""

    status: TrialStatus  # WAITING, RUNNING, or how the job ended
    failure_kind: FailureKind | None
    reason: str  # for people: the operator's own words where it has some

    @property
    def ended(self) -> bool:
        return self.status.is_terminal


def _state(status: TrialStatus, reason: str, kind: FailureKind | None = None) -> JobState:
    return JobState(status, kind, reason)


# ---- Kubeflow -----------------------------------------------------------------------------------------

KUBEFLOW_CONDITIONS: Mapping[str, JobState] = {
    "Created": _state(WAITING, "created, waiting for the operator to start its pods"),
    "Running": _state(RUNNING, "running"),
    "Restarting": _state(RUNNING, "restarting failed replicas"),
    "Suspended": _state(WAITING, "suspended"),
    "Succeeded": _state(TrialStatus.SUCCEEDED, "succeeded"),
    "Failed": _state(TrialStatus.FAILED, "failed", USER),
}
_DEADLINE = "active longer than specified deadline"


def kubeflow_state(job: Mapping[str, Any]) -> JobState:
    """A TFJob's or PyTorchJob's state from its conditions (absent until the operator first reconciles it)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    current = next((c for c in reversed(conditions) if c.get("status") == "True"), None)
    if current is None:
        return _state(WAITING, "waiting for the training operator to see it")
    meaning = KUBEFLOW_CONDITIONS.get(str(current.get("type")))
    message = str(current.get("message") or "")
    if meaning is None:
        return _state(TrialStatus.UNKNOWN, f"unknown condition {current.get('type')!r}: {message}")
    if meaning.status is TrialStatus.FAILED and _DEADLINE in message:
        return _state(TrialStatus.EARLY_STOPPED, message, FailureKind.TIMEOUT)
    return JobState(meaning.status, meaning.failure_kind, message or meaning.reason)


# ---- FrameworkController -------------------------------------------------------------------------------

FRAMEWORK_STATES: Mapping[str, JobState] = {
    "AttemptCreationPending": _state(WAITING, "waiting for FrameworkController to start an attempt"),
    "AttemptCreationRequested": _state(WAITING, "attempt requested"),
    "AttemptPreparing": _state(WAITING, "attempt preparing: no task runs yet"),
    "AttemptRunning": _state(RUNNING, "running"),
    "AttemptDeletionPending": _state(RUNNING, "attempt completing"),
    "AttemptDeletionRequested": _state(RUNNING, "attempt completing"),
    "AttemptDeleting": _state(RUNNING, "attempt completing"),
    "AttemptCompleted": _state(RUNNING, "attempt completed, another will follow"),
}
STOP_CODE = -210  # StopFrameworkRequested: executionType Stop
FC_CODE_MEANINGS: Mapping[int, tuple[TrialStatus, FailureKind | None]] = {
    0: (TrialStatus.SUCCEEDED, None),
    STOP_CODE: (TrialStatus.USER_CANCELED, FailureKind.CANCELED),
    -1004: (TrialStatus.EARLY_STOPPED, FailureKind.TIMEOUT),  # PodDeadlineExceeded
    137: (TrialStatus.FAILED, INFRA),  # SIGKILL from outside: the OOM killer, an eviction
}


def framework_code_meaning(code: int) -> tuple[TrialStatus, FailureKind | None]:
    """A completion code: positive ones are the failed container's exit code; negative ones the platform's."""
    if code in FC_CODE_MEANINGS:
        return FC_CODE_MEANINGS[code]
    return (TrialStatus.FAILED, USER if code > 0 else INFRA)


def framework_state(framework: Mapping[str, Any]) -> JobState:
    status = framework.get("status") or {}
    state = str(status.get("state") or "")
    if not state:
        return _state(WAITING, "waiting for FrameworkController to see it")
    if state != "Completed":
        return FRAMEWORK_STATES.get(state) or _state(TrialStatus.UNKNOWN, f"unknown state {state!r}")
    completion = (status.get("attemptStatus") or {}).get("completionStatus") or {}
    code = int(completion.get("code") or 0)
    meaning, kind = framework_code_meaning(code)
    reason = f"{completion.get('phrase') or 'Completed'} (completion code {code})"
    diagnostics = str(completion.get("diagnostics") or "").strip()
    return JobState(meaning, kind, f"{reason}: {diagnostics}" if diagnostics and code else reason)


# ---- AdaptDL -------------------------------------------------------------------------------------------

ADAPTDL_PHASES: Mapping[str, JobState] = {
    "Pending": _state(WAITING, "waiting for the AdaptDL scheduler to allocate it"),
    "Starting": _state(WAITING, "starting its replicas"),
    "Running": _state(RUNNING, "running"),
    "Stopping": _state(RUNNING, "stopping its replicas to restart them (rescaled)"),
    "Succeeded": _state(TrialStatus.SUCCEEDED, "succeeded"),
    "Failed": _state(TrialStatus.FAILED, "failed", USER),
}
_ADAPTDL_PLATFORM_FAILURES = ("PodCreationError", "Invalid")


def adaptdl_state(job: Mapping[str, Any]) -> JobState:
    status = job.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    meaning = ADAPTDL_PHASES.get(phase)
    if meaning is None:
        return _state(TrialStatus.UNKNOWN, f"unknown phase {phase!r}")
    if meaning.status is not TrialStatus.FAILED:
        return meaning
    why = str(status.get("reason") or "")
    kind = INFRA if why in _ADAPTDL_PLATFORM_FAILURES else USER
    return JobState(TrialStatus.FAILED, kind, f"{why or 'Failed'}: {status.get('message') or ''}".strip(": "))


# ---- pods ----------------------------------------------------------------------------------------------

IMAGE_PULL_FAILURES = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def pod_problem(pod: Mapping[str, Any], *, disruptions: bool = True) -> str | None:
    """Why the platform failed this pod, when it did (each an infrastructure failure); None otherwise.

    ``disruptions``: count evictions and lost nodes too (AdaptDL gets over them by itself)."""
    status = pod.get("status") or {}
    name = pod.get("metadata", {}).get("name")
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_FAILURES:
            return f"pod {name}: cannot pull image {container.get('image')!r}: {waiting.get('message') or waiting['reason']}"
        if waiting.get("reason") == "CreateContainerConfigError":
            return f"pod {name}: cannot configure its container: {waiting.get('message')}"
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            if (state.get("terminated") or {}).get("reason") == "OOMKilled":
                return f"pod {name}: container {container.get('name')} was killed out of memory (OOMKilled)"
    if not disruptions:
        return None
    if status.get("reason") in ("Evicted", "NodeLost", "Preempting", "UnexpectedAdmissionError"):
        return f"pod {name}: {status['reason']}: {status.get('message') or ''}".rstrip(": ")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return f"pod {name}: {condition.get('reason')}: {condition.get('message')}"
    if status.get("phase") == "Unknown":
        return f"pod {name}: its node stopped reporting (phase Unknown)"
    return None


def pod_waiting_reason(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's word on a pod it cannot place ("0/3 nodes are available: 3 Insufficient cpu.")."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled yet")
    return None
