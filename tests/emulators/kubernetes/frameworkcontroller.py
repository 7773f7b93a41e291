"""FrameworkController, following ``pkg/controller/controller.go``'s ``syncFrameworkState``/``syncTaskState``.

Each sync makes the transitions the real one makes and persists the status by updating the whole
Framework (there is no status subresource, so a client PUTting a stale Framework gets a 409). The
framework walks ``AttemptCreationPending → AttemptCreationRequested → AttemptPreparing → AttemptRunning →
AttemptDeletionPending → AttemptDeletionRequested → AttemptDeleting → AttemptCompleted → Completed``
(or back to ``AttemptCreationPending`` for a retry); its attempt ConfigMap ``<fw>-attempt`` (finalizer
``foregroundDeletion``) owns the pods ``<fw>-<role>-<i>``; tasks walk the same states. ``executionType``
``Create`` waits, ``Stop`` completes the attempt with code -210 (type ``Failed``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from . import fc_status as fc
from .apiserver import ApiServer, DeleteOptions
from .clock import Clock, parse_rfc3339
from .errors import ApiError
from .loop import Loop
from .resources import POD_TYPE, ResourceType
from .store import Store

GROUP = "frameworkcontroller.microsoft.com"
CONFIGMAPS = ("", "configmaps")
COMPLETING = ("AttemptDeletionPending", "AttemptDeletionRequested", "AttemptDeleting")
STOP_DIAG = "User has requested to stop the Framework"


class FrameworkController(Loop):
    name = "frameworkcontroller"

    def __init__(
        self,
        api: ApiServer,
        store: Store,
        clock: Clock,
        *,
        delay: float,
        tick: float = 0.02,
        pod_failure_spec: list[fc.CodeInfo] | None = None,
        completed_retain: float = 30 * 24 * 3600,
        conflict_retry_delay: tuple[int, int] = (60, 900),
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.pod_failure_spec = fc.DEFAULT_POD_FAILURE_SPEC if pod_failure_spec is None else pod_failure_spec
        self.completed_retain = completed_retain
        self.conflict_retry_delay = conflict_retry_delay

    def reconcile(self) -> None:
        rt = self.api.registry.find(GROUP, "v1", "frameworks")
        if rt is None:
            return
        for framework in self.store.list(rt.key):
            uid = framework["metadata"]["uid"]
            if not self.due(uid):
                continue
            try:
                FrameworkSync(self, rt, framework).run()
            except ApiError as error:
                if error.code not in (404, 409):
                    raise


class FrameworkSync:
    def __init__(self, controller: FrameworkController, rt: ResourceType, framework: dict[str, Any]) -> None:
        self.c, self.api, self.rt, self.f = controller, controller.api, rt, framework
        self.meta = framework["metadata"]
        self.spec = framework.get("spec") or {}
        self.status: dict[str, Any] | None = copy.deepcopy(framework.get("status"))
        self.now = self.api.now()

    def run(self) -> None:
        before = copy.deepcopy(self.status)
        if self.status is None:
            self.status = fc.framework_status(self.f, self.now)
        elif not self._sync_graceful_timeouts():
            self._sync_state()
        if self.status != before:
            self.api.update(
                self.rt, self.meta["namespace"], self.meta["name"], {**self.f, "status": self.status}
            )
            self.c.hold(self.meta["uid"])

    @property
    def state(self) -> str:
        assert self.status is not None
        return str(self.status["state"])

    def _transition(self, state: str) -> None:
        assert self.status is not None
        fc.transition_framework(self.status, state, self.now)

    def _roles(self) -> list[dict[str, Any]]:
        assert self.status is not None
        return self.status["attemptStatus"]["taskRoleStatuses"]

    def _sync_graceful_timeouts(self) -> bool:
        """``updatePodGracefulDeletionTimeoutSec``: copied from the spec, persisted before it is used."""
        if self.state in ("AttemptCompleted", "Completed"):
            return False
        wanted = {
            r["name"]: (r.get("task") or {}).get("podGracefulDeletionTimeoutSec")
            for r in self.spec.get("taskRoles") or []
        }
        changed = False
        for role in self._roles():
            if role["name"] in wanted and role["podGracefulDeletionTimeoutSec"] != wanted[role["name"]]:
                role["podGracefulDeletionTimeoutSec"] = wanted[role["name"]]
                changed = True
        return changed

    # ---- syncFrameworkState --------------------------------------------------------------------------

    def _sync_state(self) -> None:
        assert self.status is not None
        if self.state == "Completed":
            completed = parse_rfc3339(self.status["completionTime"])
            if self.c.clock.now() >= completed + self.c.completed_retain:
                self._delete(self.rt, self.f, DeleteOptions(propagation="Foreground"))
            return
        cm = None
        if self.state != "AttemptCompleted":
            cm = self._config_map()
            if cm is None and self._without_config_map():
                return
            if cm is not None:
                self._with_config_map(cm)
        if self.state == "AttemptCompleted" and self._attempt_completed():
            return
        if self.state == "AttemptCreationPending":
            self._create_attempt()
            return
        execution = self.spec.get("executionType", "Start")
        if self.state not in COMPLETING and execution == "Stop":
            self._complete_attempt(False, fc.completion(-210, STOP_DIAG))
        if self.state not in COMPLETING:
            self._completion_policy()
        for role in self._roles():
            for task in role["taskStatuses"]:
                TaskSync(self, role, task, cm).run()
        if self.state == "AttemptPreparing" and any(
            t["state"] == "AttemptRunning" and not t["deletionPending"]
            for r in self._roles()
            for t in r["taskStatuses"]
        ):
            self._transition("AttemptRunning")

    def _config_map(self) -> dict[str, Any] | None:
        assert self.status is not None
        cm = self.api.store.get(CONFIGMAPS, self.meta["namespace"], f"{self.meta['name']}-attempt")
        if cm is None or cm["metadata"]["uid"] != self.status["attemptStatus"]["configMapUID"]:
            return None
        return cm

    def _without_config_map(self) -> bool:
        """The attempt's ConfigMap is gone; True when the sync ends here."""
        assert self.status is not None
        if self.state == "AttemptCreationRequested":
            stop = self.spec.get("executionType") == "Stop"
            code, diag = (
                (-210, STOP_DIAG)
                if stop
                else (
                    -110,
                    "ConfigMap does not appear in the local cache within "
                    "timeout 5m0s, so consider it was deleted and explicitly delete it",
                )
            )
            self._complete_attempt(True, fc.completion(code, diag))
            return True
        if self.state != "AttemptCreationPending":
            status = None
            if self.status["attemptStatus"]["completionStatus"] is None:
                status = fc.completion(-100, "ConfigMap was deleted by others")
            self._complete_attempt(True, status)
            return True
        return False

    def _with_config_map(self, cm: dict[str, Any]) -> None:
        assert self.status is not None
        if cm["metadata"].get("deletionTimestamp"):
            if self.status["attemptStatus"]["completionStatus"] is None:
                self.status["attemptStatus"]["completionStatus"] = fc.completion(
                    -100, "ConfigMap is being deleted by others"
                )
            self._transition("AttemptDeleting")
            return
        if self.state == "AttemptDeletionPending":
            self._delete(self.api.registry.by_key(*CONFIGMAPS), cm, DeleteOptions(uid=cm["metadata"]["uid"]))
            self._transition("AttemptDeletionRequested")
        elif self.state == "AttemptCreationRequested":
            self._transition("AttemptPreparing")

    def _attempt_completed(self) -> bool:
        """Retry or complete the framework; True when the sync ends here."""
        assert self.status is not None
        retry = self.status["retryPolicyStatus"]
        decision = fc.should_retry(
            self.spec.get("retryPolicy") or {},
            retry,
            self.status["attemptStatus"]["completionStatus"],
            self.c.conflict_retry_delay,
        )
        if retry["retryDelaySec"] is None:
            if not decision.retry:
                self._transition("Completed")
                return True
            retry["retryDelaySec"] = decision.delay
        completed = parse_rfc3339(self.status["attemptStatus"]["completionTime"])
        if (
            self.spec.get("executionType") != "Stop"
            and self.c.clock.now() < completed + retry["retryDelaySec"]
        ):
            return True
        retry["totalRetriedCount"] += 1
        if decision.accountable:
            retry["accountableRetriedCount"] += 1
        retry["retryDelaySec"] = None
        self.status["attemptStatus"] = fc.framework_attempt(self.f, retry["totalRetriedCount"], self.now)
        self._transition("AttemptCreationPending")
        return True

    def _create_attempt(self) -> None:
        assert self.status is not None
        execution = self.spec.get("executionType", "Start")
        if self.meta.get("deletionTimestamp") or execution == "Create":
            return
        if execution == "Stop":
            self._complete_attempt(True, fc.completion(-210, STOP_DIAG))
            return
        attempt = self.status["attemptStatus"]
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": attempt["configMapName"],
                "ownerReferences": [
                    {
                        "apiVersion": f"{GROUP}/v1",
                        "kind": "Framework",
                        "name": self.meta["name"],
                        "uid": self.meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": ["foregroundDeletion"],
                "annotations": {
                    "FC_FRAMEWORK_NAMESPACE": self.meta["namespace"],
                    "FC_FRAMEWORK_NAME": self.meta["name"],
                    "FC_CONFIGMAP_NAME": attempt["configMapName"],
                    "FC_FRAMEWORK_UID": self.meta["uid"],
                    "FC_FRAMEWORK_ATTEMPT_ID": str(attempt["id"]),
                },
                "labels": {"FC_FRAMEWORK_NAME": self.meta["name"]},
            },
        }
        rt = self.api.registry.by_key(*CONFIGMAPS)
        assert rt is not None
        cm = self.api.create(rt, self.meta["namespace"], body)
        attempt["configMapUID"] = cm["metadata"]["uid"]
        attempt["instanceUID"] = f"{attempt['id']}_{cm['metadata']['uid']}"
        self._transition("AttemptCreationRequested")

    def _complete_attempt(self, force: bool, status: dict[str, Any] | None) -> None:
        assert self.status is not None
        attempt = self.status["attemptStatus"]
        if attempt["completionStatus"] is None:
            attempt["completionStatus"] = status
        for role in self._roles():
            for task in role["taskStatuses"]:
                if task["attemptStatus"]["completionStatus"] is None:
                    task["attemptStatus"]["completionStatus"] = fc.completion(
                        -220, "Stop to complete current FrameworkAttempt"
                    )
        if not force:
            self._transition("AttemptDeletionPending")
            return
        for role in self._roles():
            for task in role["taskStatuses"]:
                if task["state"] != "Completed":
                    fc.transition_task(task, "AttemptCompleted", self.now)
                    task["retryPolicyStatus"]["retryDelaySec"] = None
                    fc.transition_task(task, "Completed", self.now)
        self._transition("AttemptCompleted")

    # ---- completion policy ---------------------------------------------------------------------------

    def _completion_policy(self) -> bool:
        first: tuple[str, dict[str, Any]] | None = None
        roles = {r["name"]: r for r in self._roles()}
        for role_spec in self.spec.get("taskRoles") or []:
            role = roles.get(role_spec["name"])
            if role is None:
                continue
            policy = role_spec.get("frameworkAttemptCompletionPolicy") or {}
            for limit_key, kind, word in (
                ("minFailedTaskCount", fc.FAILED, "Failed"),
                ("minSucceededTaskCount", fc.SUCCEEDED, "Succeeded"),
            ):
                limit = policy.get(limit_key, -1)
                done = _ordered(role, kind)
                if limit >= 1 and len(done) >= limit:
                    trigger = done[limit - 1]
                    if first is None or trigger["completionTime"] < first[0]:
                        status = {
                            **trigger["attemptStatus"]["completionStatus"],
                            "trigger": {
                                "message": f"{word}TaskCount {len(done)} has reached Min{word}TaskCount {limit} in the TaskRole",
                                "taskRoleName": role["name"],
                                "taskIndex": trigger["index"],
                            },
                        }
                        status.pop("pod", None)
                        first = (trigger["completionTime"], status)
        if first is not None:
            self._complete_attempt(False, first[1])
            return True
        return self._all_completed(roles)

    def _all_completed(self, roles: dict[str, dict[str, Any]]) -> bool:
        total = sum(r.get("taskNumber", 0) for r in self.spec.get("taskRoles") or [])
        done = [(t, r["name"]) for r in roles.values() for t in r["taskStatuses"] if _completed(t)]
        if total < 1 or len(done) < total:
            return False
        last, role = max(done, key=lambda item: item[0]["completionTime"] or "")
        diag = (
            f"CompletedTaskCount {len(done)} has reached TotalTaskCount {total} and no user specified "
            "conditions in FrameworkAttemptCompletionPolicy have ever been triggered"
        )
        self._complete_attempt(
            False,
            fc.completion(
                0, diag, trigger={"message": diag, "taskRoleName": role, "taskIndex": last["index"]}
            ),
        )
        return True

    def _delete(self, rt: ResourceType | None, obj: dict[str, Any], options: DeleteOptions) -> None:
        if rt is None:
            return
        try:
            self.api.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], options)
        except ApiError as error:
            if error.code not in (404, 409):
                raise


def _completed(task: dict[str, Any]) -> bool:
    return task["state"] == "Completed" and not task["deletionPending"]


def _ordered(role: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    tasks = [
        t
        for t in role["taskStatuses"]
        if _completed(t)
        and (t["attemptStatus"]["completionStatus"] or {}).get("type", {}).get("name") == kind
    ]
    return sorted(tasks, key=lambda t: t["completionTime"] or "")


class TaskSync:
    """``syncTaskState`` for one task."""

    def __init__(
        self, framework: FrameworkSync, role: dict[str, Any], task: dict[str, Any], cm: dict[str, Any] | None
    ):
        self.fw, self.api, self.role, self.task, self.cm = framework, framework.api, role, task, cm
        self.now = framework.now
        self.role_spec = next(
            (r for r in framework.spec.get("taskRoles") or [] if r["name"] == role["name"]), None
        )

    def _transition(self, state: str) -> None:
        fc.transition_task(self.task, state, self.now)

    def run(self) -> None:
        if self.task["state"] == "Completed":
            return
        if self.task["state"] != "AttemptCompleted" and self._with_pod():
            return
        if self.task["state"] == "AttemptCompleted":
            self._retry_or_complete()
            return
        if self.task["state"] == "AttemptCreationPending" and self.fw.state not in COMPLETING:
            self._create_pod()

    def _with_pod(self) -> bool:
        """Sync against the task's pod; True when this sync of the task ends here."""
        attempt = self.task["attemptStatus"]
        pod = self.api.store.get(POD_TYPE.key, self.fw.meta["namespace"], attempt["podName"])
        if pod is not None and pod["metadata"]["uid"] != attempt["podUID"]:
            pod = None
        state = self.task["state"]
        if pod is None:
            if state == "AttemptCreationRequested":
                self._complete(
                    True,
                    fc.completion(
                        -111,
                        "Pod does not appear in the local cache within timeout 5m0s, "
                        "so consider it was deleted and explicitly delete it",
                    ),
                )
                return True
            if state != "AttemptCreationPending":
                missing = attempt["completionStatus"] is None
                self._complete(True, fc.completion(-101, "Pod was deleted by others") if missing else None)
                return True
            return False
        if pod["metadata"].get("deletionTimestamp"):
            if attempt["completionStatus"] is None:
                attempt["completionStatus"] = fc.completion(-101, "Pod is being deleted by others")
            self._transition("AttemptDeleting")
            self._graceful_deletion(pod)
            return True
        if state == "AttemptDeletionPending":
            self._delete_pod(pod)
            self._transition("AttemptDeletionRequested")
        if self.task["state"] == "AttemptDeletionRequested":
            return True
        if state == "AttemptCreationRequested":
            self._transition("AttemptPreparing")
        return self._follow_pod(pod)

    def _follow_pod(self, pod: dict[str, Any]) -> bool:
        attempt = self.task["attemptStatus"]
        status = pod.get("status") or {}
        attempt["podNodeName"] = pod["spec"].get("nodeName", "")
        attempt["podIP"] = status.get("podIP", "")
        attempt["podHostIP"] = status.get("hostIP", "")
        phase = status.get("phase")
        if phase == "Pending":
            self._transition("AttemptPreparing")
        elif phase == "Running":
            self._transition("AttemptRunning")
        elif phase == "Succeeded":
            self._complete(False, fc.completion(0, "Pod succeeded", pod=fc.pod_completion(pod)))
            return True
        elif phase == "Failed":
            code, phrase, kind, diag = fc.match_failed_pod(pod, self.fw.c.pod_failure_spec)
            self._complete(
                False,
                {
                    "code": code,
                    "phrase": phrase,
                    "type": kind,
                    "diagnostics": f"Pod failed: {diag}",
                    "pod": fc.pod_completion(pod),
                },
            )
            return True
        return False

    def _graceful_deletion(self, pod: dict[str, Any]) -> None:
        timeout = self.role.get("podGracefulDeletionTimeoutSec")
        deleting = parse_rfc3339(pod["metadata"]["deletionTimestamp"]) - pod["metadata"].get(
            "deletionGracePeriodSeconds", 0
        )
        if timeout is not None and self.fw.c.clock.now() >= deleting + timeout:
            self.fw._delete(POD_TYPE, pod, DeleteOptions(grace_seconds=0, uid=pod["metadata"]["uid"]))

    def _complete(self, force: bool, status: dict[str, Any] | None) -> None:
        attempt = self.task["attemptStatus"]
        if attempt["completionStatus"] is None:
            attempt["completionStatus"] = status
        self._transition("AttemptCompleted" if force else "AttemptDeletionPending")

    def _delete_pod(self, pod: dict[str, Any]) -> None:
        self.fw._delete(POD_TYPE, pod, DeleteOptions(uid=pod["metadata"]["uid"]))

    def _retry_or_complete(self) -> None:
        retry = self.task["retryPolicyStatus"]
        policy = ((self.role_spec or {}).get("task") or {}).get("retryPolicy") or {}
        decision = (
            fc.should_retry(policy, retry, self.task["attemptStatus"]["completionStatus"])
            if self.role_spec is not None
            else fc.RetryDecision(False, True, 0, "TaskRoleSpec is already deleted")
        )
        if retry["retryDelaySec"] is None and not decision.retry:
            self._transition("Completed")
            self.fw._completion_policy() if self.fw.state not in COMPLETING else None
            return
        retry["totalRetriedCount"] += 1
        if decision.accountable:
            retry["accountableRetriedCount"] += 1
        retry["retryDelaySec"] = None
        self.task["attemptStatus"] = fc.task_attempt(
            self.fw.meta["name"], self.role["name"], self.task["index"], retry["totalRetriedCount"], self.now
        )
        self._transition("AttemptCreationPending")

    def _create_pod(self) -> None:
        if self.role_spec is None:
            return
        body = new_pod(self.fw.f, self.role_spec, self.role, self.task, self.cm, self.fw.status)
        try:
            pod = self.api.create(POD_TYPE, self.fw.meta["namespace"], body)
        except ApiError as error:
            if error.code in (422, 413):
                self._complete(True, fc.completion(-200, f"Failed to create Pod: {error.message}"))
                return
            if error.code in (400, 403):
                self._complete(True, fc.completion(-310, f"Failed to create Pod: {error.message}"))
                return
            raise
        attempt = self.task["attemptStatus"]
        attempt["podUID"] = pod["metadata"]["uid"]
        attempt["instanceUID"] = f"{attempt['id']}_{pod['metadata']['uid']}"
        self._transition("AttemptCreationRequested")


def new_pod(
    framework: dict[str, Any],
    role_spec: dict[str, Any],
    role: dict[str, Any],
    task: dict[str, Any],
    cm: dict[str, Any] | None,
    status: dict[str, Any] | None,
) -> dict[str, Any]:
    """``Framework.NewPod``: placeholders replaced, owner ConfigMap, FC_* annotations, labels and variables."""
    meta = framework["metadata"]
    name, namespace, role_name, index = meta["name"], meta["namespace"], role["name"], str(task["index"])
    attempt = (status or {})["attemptStatus"]
    pod_name = task["attemptStatus"]["podName"]
    text = json.dumps(((role_spec.get("task") or {}).get("pod")) or {})
    for key, value in (
        ("FC_FRAMEWORK_NAMESPACE", namespace),
        ("FC_FRAMEWORK_NAME", name),
        ("FC_TASKROLE_NAME", role_name),
        ("FC_TASK_INDEX", index),
        ("FC_CONFIGMAP_NAME", attempt["configMapName"]),
        ("FC_POD_NAME", pod_name),
    ):
        text = text.replace("{{" + key + "}}", value)
    template = json.loads(text)
    pod_meta = template.get("metadata") or {}
    pod_meta.pop("creationTimestamp", None)
    pod_meta.update({"name": pod_name, "namespace": namespace})
    cm_meta = (cm or {}).get("metadata") or {}
    pod_meta["ownerReferences"] = [
        *(pod_meta.get("ownerReferences") or []),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": attempt["configMapName"],
            "uid": cm_meta.get("uid", ""),
            "controller": True,
            "blockOwnerDeletion": True,
        },
    ]
    values = {
        "FC_FRAMEWORK_NAMESPACE": namespace,
        "FC_FRAMEWORK_NAME": name,
        "FC_TASKROLE_NAME": role_name,
        "FC_TASK_INDEX": index,
        "FC_CONFIGMAP_NAME": attempt["configMapName"],
        "FC_POD_NAME": pod_name,
        "FC_FRAMEWORK_UID": meta["uid"],
        "FC_FRAMEWORK_ATTEMPT_ID": str(attempt["id"]),
        "FC_FRAMEWORK_ATTEMPT_INSTANCE_UID": attempt["instanceUID"],
        "FC_CONFIGMAP_UID": attempt["configMapUID"],
        "FC_TASKROLE_UID": role["instanceUID"],
        "FC_TASK_UID": task["instanceUID"],
        "FC_TASK_ATTEMPT_ID": str(task["attemptStatus"]["id"]),
    }
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **values}
    pod_meta["labels"] = {
        **(pod_meta.get("labels") or {}),
        "FC_FRAMEWORK_NAME": name,
        "FC_TASKROLE_NAME": role_name,
        "FC_TASK_INDEX": index,
    }
    env = [{"name": k, "value": v} for k, v in values.items()]
    env.append({"name": "FC_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})
    env.append(
        {"name": "FC_TASK_ATTEMPT_INSTANCE_UID", "value": f"{task['attemptStatus']['id']}_$(FC_POD_UID)"}
    )
    spec = template.get("spec") or {}
    for field_name in ("containers", "initContainers"):
        for container in spec.get(field_name) or []:
            container["env"] = copy.deepcopy(env) + (container.get("env") or [])
            container.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
