"""The Kubernetes platforms' state tables: each operator's status and each pod's, in trialfleet's terms."""

from __future__ import annotations

from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.training_services.kubernetes.states import (
    adaptdl_state,
    framework_state,
    kubeflow_state,
    pod_problem,
    pod_waiting_reason,
)

INFRA, USER, CANCELED, TIMEOUT = (
    FailureKind.INFRASTRUCTURE,
    FailureKind.USER_CODE,
    FailureKind.CANCELED,
    FailureKind.TIMEOUT,
)
S = TrialStatus


def condition(kind: str, status: str = "True", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": f"TFJob{kind}", "message": message}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (None, (S.WAITING, None, "waiting for the training operator")),
        ([condition("Created", message="TFJob x is created.")], (S.WAITING, None, "TFJob x is created.")),
        (
            [condition("Created"), condition("Running", message="TFJob default/x is running.")],
            (S.RUNNING, None, "running"),
        ),
        (
            [condition("Created"), condition("Restarting", message="restarting")],
            (S.RUNNING, None, "restarting"),
        ),
        (
            [condition("Created"), condition("Suspended", message="TFJob x is suspended.")],
            (S.WAITING, None, "suspended"),
        ),
        (
            [condition("Created"), condition("Running", "False"), condition("Succeeded", message="done.")],
            (S.SUCCEEDED, None, "done."),
        ),
        (
            [
                condition("Created"),
                condition("Running", "False"),
                condition("Failed", message="1 Worker replica(s) failed."),
            ],
            (S.FAILED, USER, "1 Worker replica(s) failed."),
        ),
        (
            [
                condition("Created"),
                condition(
                    "Failed", message="Job x has failed because it has reached the specified backoff limit"
                ),
            ],
            (S.FAILED, USER, "backoff limit"),
        ),
        (
            [
                condition(
                    "Failed", message="Job x has failed because it was active longer than specified deadline"
                )
            ],
            (S.EARLY_STOPPED, TIMEOUT, "deadline"),
        ),
        ([condition("Created"), condition("Exploded")], (S.UNKNOWN, None, "unknown condition 'Exploded'")),
    ],
)
def test_kubeflow_conditions(conditions: list[dict[str, str]] | None, expected: tuple[Any, Any, str]) -> None:
    job = {"status": {"conditions": conditions}} if conditions is not None else {}
    state = kubeflow_state(job)
    assert (state.status, state.failure_kind) == expected[:2]
    assert expected[2] in state.reason


def framework(state: str, code: int | None = None, phrase: str = "", diagnostics: str = "") -> dict[str, Any]:
    completion = None if code is None else {"code": code, "phrase": phrase, "diagnostics": diagnostics}
    return {"status": {"state": state, "attemptStatus": {"completionStatus": completion}}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, (S.WAITING, None, "waiting for FrameworkController")),
        (framework("AttemptCreationPending"), (S.WAITING, None, "start an attempt")),
        (framework("AttemptCreationRequested"), (S.WAITING, None, "requested")),
        (framework("AttemptPreparing"), (S.WAITING, None, "preparing")),
        (framework("AttemptRunning"), (S.RUNNING, None, "running")),
        (framework("AttemptDeletionPending"), (S.RUNNING, None, "completing")),
        (framework("AttemptDeleting"), (S.RUNNING, None, "completing")),
        (framework("AttemptCompleted"), (S.RUNNING, None, "another will follow")),
        (framework("Completed", 0, "Succeeded"), (S.SUCCEEDED, None, "Succeeded (completion code 0)")),
        (
            framework(
                "Completed", -210, "StopFrameworkRequested", "User has requested to stop the Framework"
            ),
            (S.USER_CANCELED, CANCELED, "StopFrameworkRequested (completion code -210): User has requested"),
        ),
        (framework("Completed", 3, "ContainerUnrecognizedFailed"), (S.FAILED, USER, "code 3")),
        (framework("Completed", 137, "ContainerSigKillReceived"), (S.FAILED, INFRA, "code 137")),
        (framework("Completed", -1200, "ContainerDockerOOMKilled"), (S.FAILED, INFRA, "OOMKilled")),
        (framework("Completed", -1000, "PodEvicted"), (S.FAILED, INFRA, "PodEvicted")),
        (framework("Completed", -1001, "PodNodeLost"), (S.FAILED, INFRA, "PodNodeLost")),
        (framework("Completed", -1004, "PodDeadlineExceeded"), (S.EARLY_STOPPED, TIMEOUT, "Deadline")),
        (framework("Completed", -200, "PodCreationPermanentError"), (S.FAILED, INFRA, "PodCreation")),
        (framework("Gone"), (S.UNKNOWN, None, "unknown state 'Gone'")),
    ],
)
def test_framework_states_and_completion_codes(obj: dict[str, Any], expected: tuple[Any, Any, str]) -> None:
    state = framework_state(obj)
    assert (state.status, state.failure_kind) == expected[:2]
    assert expected[2] in state.reason


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, (S.WAITING, None, "allocate")),
        ({"phase": "Pending"}, (S.WAITING, None, "allocate")),
        ({"phase": "Starting"}, (S.WAITING, None, "starting")),
        ({"phase": "Running"}, (S.RUNNING, None, "running")),
        ({"phase": "Stopping"}, (S.RUNNING, None, "rescaled")),
        ({"phase": "Succeeded"}, (S.SUCCEEDED, None, "succeeded")),
        (
            {"phase": "Failed", "reason": "PodFailure", "message": "job-0 Failed"},
            (S.FAILED, USER, "PodFailure: job-0 Failed"),
        ),
        (
            {"phase": "Failed", "reason": "PodCreationError", "message": "(403)"},
            (S.FAILED, INFRA, "PodCreationError"),
        ),
        (
            {"phase": "Failed", "reason": "Invalid", "message": "inconsistent pods"},
            (S.FAILED, INFRA, "Invalid"),
        ),
        ({"phase": "Zombie"}, (S.UNKNOWN, None, "unknown phase")),
    ],
)
def test_adaptdl_phases(status: dict[str, Any], expected: tuple[Any, Any, str]) -> None:
    state = adaptdl_state({"status": status})
    assert (state.status, state.failure_kind) == expected[:2]
    assert expected[2] in state.reason


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": status}


def container(state: dict[str, Any], last: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "main", "image": "img:1", "state": state, "lastState": last or {}}


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        ({"phase": "Running", "containerStatuses": [container({"running": {}})]}, None),
        (
            {
                "phase": "Succeeded",
                "containerStatuses": [container({"terminated": {"exitCode": 0, "reason": "Completed"}})],
            },
            None,
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [container({"terminated": {"exitCode": 3, "reason": "Error"}})],
            },
            None,
        ),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    container({"waiting": {"reason": "ErrImagePull", "message": "denied"}})
                ],
            },
            "pod p: cannot pull image 'img:1': denied",
        ),
        (
            {
                "phase": "Pending",
                "initContainerStatuses": [container({"waiting": {"reason": "ImagePullBackOff"}})],
            },
            "pod p: cannot pull image 'img:1': ImagePullBackOff",
        ),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    container(
                        {
                            "waiting": {
                                "reason": "CreateContainerConfigError",
                                "message": 'secret "s" not found',
                            }
                        }
                    )
                ],
            },
            'pod p: cannot configure its container: secret "s" not found',
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [container({"terminated": {"exitCode": 137, "reason": "OOMKilled"}})],
            },
            "pod p: container main was killed out of memory (OOMKilled)",
        ),
        (
            {"phase": "Failed", "reason": "Evicted", "message": "low on memory"},
            "pod p: Evicted: low on memory",
        ),
        ({"phase": "Failed", "reason": "NodeLost"}, "pod p: NodeLost"),
        (
            {
                "phase": "Running",
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "m",
                    }
                ],
            },
            "pod p: PreemptionByScheduler: m",
        ),
        ({"phase": "Unknown"}, "pod p: its node stopped reporting (phase Unknown)"),
    ],
)
def test_pod_problems_are_the_platforms_doing(status: dict[str, Any], problem: str | None) -> None:
    assert pod_problem(pod(status)) == problem


def test_operators_that_get_over_disruptions_see_only_their_own_problems() -> None:
    assert pod_problem(pod({"phase": "Failed", "reason": "Evicted"}), disruptions=False) is None
    pulling = {"phase": "Pending", "containerStatuses": [container({"waiting": {"reason": "ErrImagePull"}})]}
    assert pod_problem(pod(pulling), disruptions=False) == "pod p: cannot pull image 'img:1': ErrImagePull"


def test_the_schedulers_reason_for_a_pending_pod() -> None:
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/2 nodes are available.",
    }
    assert (
        pod_waiting_reason(pod({"phase": "Pending", "conditions": [unschedulable]}))
        == "0/2 nodes are available."
    )
    assert pod_waiting_reason(pod({"phase": "Pending", "conditions": []})) is None
    assert pod_waiting_reason(pod({"phase": "Running", "conditions": [unschedulable]})) is None
