"""The Kubeflow training operator (v1.9.0) for TFJob and PyTorchJob, as a reconcile loop.

Per job, what ``ReconcileJobs``/``ReconcilePods``/``UpdateJobStatus`` do: the ``Created`` condition when the
job is first seen; pods ``<job>-<type>-<i>`` (``training.kubeflow.org/*`` labels, controller owner
reference, the replica ``restartPolicy`` written into the pod, ``ExitCode`` as ``Never``, ``TF_CONFIG`` or
the PyTorch variables) and their headless services; ``replicaStatuses`` counted from the pods; success and
failure rules per kind; failed pods restarted (deleted and recreated) under ``OnFailure``/``Always``/
retryable ``ExitCode``; ``backoffLimit`` and ``activeDeadlineSeconds`` with the real messages; pods cleaned
up by ``cleanPodPolicy`` once finished; ``ttlSecondsAfterFinished``; ``suspend``/resume. The status goes
through the status subresource; the spec defaults stay in the controller's memory, as upstream.
"""

from __future__ import annotations

import copy
from typing import Any

from . import kubeflow_spec as spec_rules
from . import kubeflow_status as cond
from .apiserver import ApiServer, DeleteOptions, ValidatingWebhook
from .clock import Clock, parse_rfc3339
from .errors import ApiError, webhook_denied
from .fielderrors import aggregate
from .loop import Loop
from .resources import POD_TYPE, ResourceType
from .store import Store

GROUP = "kubeflow.org"
JOB_NAME, REPLICA_TYPE, REPLICA_INDEX, OPERATOR_NAME, JOB_ROLE = (
    "training.kubeflow.org/job-name",
    "training.kubeflow.org/replica-type",
    "training.kubeflow.org/replica-index",
    "training.kubeflow.org/operator-name",
    "training.kubeflow.org/job-role",
)
SERVICES = ("", "services")
#: the pod label holding the replica index, by operator version: the training operator from v1.4
#: (kubeflow/common's ``ReplicaIndexLabel``), up to v1.3 and tf-operator / pytorch-operator v1 on
#: kubeflow/common before its ``training.kubeflow.org/`` prefix (``replica-index``), tf-operator v1alpha2
#: (``tfReplicaIndexLabel``) and the standalone pytorch-operator (``pytorchReplicaIndexLabel``)
INDEX_LABELS = {
    "training-operator": REPLICA_INDEX,
    "training-operator-1.3": "replica-index",
    "tf-operator-v1alpha2": "tf-replica-index",
    "pytorch-operator": "pytorch-replica-index",
}


def webhooks() -> list[ValidatingWebhook]:
    hooks = []
    for kind in (spec_rules.TFJOB, spec_rules.PYTORCHJOB):

        def check(
            operation: str, job: dict[str, Any], old: dict[str, Any] | None, kind: spec_rules.JobKind = kind
        ) -> ApiError | None:
            errors = spec_rules.validate(kind, job, old)
            return webhook_denied(kind.webhook, 403, "Forbidden", aggregate(errors)) if errors else None

        hooks.append(ValidatingWebhook(kind.webhook, (GROUP, kind.plural), ("CREATE", "UPDATE"), check))
    return hooks


class TrainingOperator(Loop):
    name = "training-operator"

    def __init__(
        self, api: ApiServer, store: Store, clock: Clock, *, delay: float, tick: float = 0.02
    ) -> None:
        super().__init__(store, clock, delay=delay, tick=tick)
        self.api = api
        self.seen: set[str] = set()
        self.index_label = REPLICA_INDEX  # a value of INDEX_LABELS: the operator version emulated

    def reset(self) -> None:
        super().reset()
        self.seen.clear()

    def reconcile(self) -> None:
        for kind in (spec_rules.TFJOB, spec_rules.PYTORCHJOB):
            rt = self.api.registry.find(GROUP, "v1", kind.plural)
            if rt is None:
                continue
            for job in self.store.list(rt.key):
                uid = job["metadata"]["uid"]
                if job["metadata"].get("deletionTimestamp") or not self.due(uid):
                    continue
                manager = ((job.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
                if manager not in (None, spec_rules.MANAGERS[0]):
                    continue
                try:
                    JobSync(self, kind, rt, job).run()
                except ApiError as error:
                    if error.code not in (404, 409):
                        raise


class JobSync:
    """One reconcile of one job (the upstream ``Reconcile``)."""

    def __init__(
        self, operator: TrainingOperator, kind: spec_rules.JobKind, rt: ResourceType, job: dict[str, Any]
    ):
        self.op, self.api, self.kind, self.rt, self.job = operator, operator.api, kind, rt, job
        self.meta = job["metadata"]
        self.status: dict[str, Any] = copy.deepcopy(job.get("status") or {})
        self._pods: list[dict[str, Any]] = []  # the pods this pass reads (run)
        self.spec = spec_rules.defaulted(kind, job.get("spec") or {})
        self.replicas: dict[str, Any] = self.spec[kind.replica_field]
        self.run_policy: dict[str, Any] = self.spec["runPolicy"]
        self.now = self.api.now()

    def run(self) -> None:
        before = copy.deepcopy(self.status)
        if self.meta["uid"] not in self.op.seen:
            self.op.seen.add(self.meta["uid"])
            cond.set_condition(
                self.status,
                cond.CREATED,
                "True",
                cond.reason(self.kind.kind, "Created"),
                f"{self.kind.kind} {self.meta['name']} is created.",
                self.now,
            )
        pods = self._owned(POD_TYPE.key)
        self._pods = pods  # one snapshot per pass: the counts and worker 0's completion read the same pods
        if cond.is_finished(self.status):
            self._finished(pods)
        elif self.run_policy.get("suspend"):
            self._suspend(pods)
        else:
            self._active(pods)
        self.status.setdefault("replicaStatuses", {})
        if self.status != before:
            body = {**self.job, "status": self.status}
            self.api.update(self.rt, self.meta["namespace"], self.meta["name"], body, subresource="status")
            self.op.hold(self.meta["uid"])

    def _owned(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        found = []
        for obj in self.api.store.list(key, self.meta["namespace"]):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == self.meta["uid"] and r.get("controller") for r in refs):
                found.append(obj)
        return found

    # ---- the three branches of ReconcileJobs ---------------------------------------------------------

    def _finished(self, pods: list[dict[str, Any]]) -> None:
        self._delete_pods(pods)
        if cond.is_true(self.status, cond.SUCCEEDED):
            for replica in (self.status.get("replicaStatuses") or {}).values():
                replica["succeeded"] = replica.get("succeeded", 0) + replica.pop("active", 0)
        self._ttl()

    def _suspend(self, pods: list[dict[str, Any]]) -> None:
        self._delete_pods(pods)
        for replica in (self.status.get("replicaStatuses") or {}).values():
            replica.pop("active", None)
        message = f"{self.kind.kind} {self.meta['name']} is suspended."
        why = cond.reason(self.kind.kind, "Suspended")
        if cond.is_true(self.status, cond.RUNNING):
            cond.set_condition(self.status, cond.RUNNING, "False", why, message, self.now)
        if not cond.is_true(self.status, cond.SUSPENDED):
            cond.set_condition(self.status, cond.SUSPENDED, "True", why, message, self.now)

    def _active(self, pods: list[dict[str, Any]]) -> None:
        if cond.is_true(self.status, cond.SUSPENDED):
            cond.set_condition(
                self.status,
                cond.SUSPENDED,
                "False",
                cond.reason(self.kind.kind, "Resumed"),
                f"{self.kind.kind} {self.meta['name']} is resumed.",
                self.now,
            )
            self.status["startTime"] = self.now
        failure = self._past_limits(pods)
        if failure is not None:
            self.status.setdefault("completionTime", self.now)
            self._delete_pods(pods)
            self._ttl()
            cond.set_condition(
                self.status, cond.FAILED, "True", cond.reason(self.kind.kind, "Failed"), failure, self.now
            )
            return
        for rtype, replica in self.replicas.items():
            self._reconcile_pods(rtype, replica, pods)
            self._reconcile_services(rtype, replica)
        self._update_job_status()

    def _past_limits(self, pods: list[dict[str, Any]]) -> str | None:
        limit = self.run_policy.get("backoffLimit")
        name = self.meta["name"]
        if limit is not None:
            active = sum(1 for p in pods if _active(p))
            failed = sum(1 for p in pods if p["status"].get("phase") == "Failed")
            total = sum(r["replicas"] for r in self.replicas.values())
            previous = sum(r.get("failed", 0) for r in (self.status.get("replicaStatuses") or {}).values())
            exceeds = failed > previous and active != total and limit < 1
            if exceeds or self._past_backoff(pods, limit):
                return f"Job {name} has failed because it has reached the specified backoff limit"
        deadline = self.run_policy.get("activeDeadlineSeconds")
        start = self.status.get("startTime")
        if (
            deadline is not None
            and start is not None
            and self.op.clock.now() - parse_rfc3339(start) >= deadline
        ):
            return f"Job {name} has failed because it was active longer than specified deadline"
        return None

    def _past_backoff(self, pods: list[dict[str, Any]], limit: int) -> bool:
        restarts = 0
        for rtype, replica in self.replicas.items():
            if replica["restartPolicy"] not in ("OnFailure", "Always", "ExitCode"):
                continue
            for pod in pods:
                if (
                    pod["metadata"]["labels"].get(REPLICA_TYPE) != rtype.lower()
                    or pod["status"].get("phase") != "Running"
                ):
                    continue
                statuses = (pod["status"].get("initContainerStatuses") or []) + (
                    pod["status"].get("containerStatuses") or []
                )
                restarts += sum(s.get("restartCount", 0) for s in statuses)
        return restarts > 0 if limit == 0 else restarts >= limit

    # ---- pods and services ---------------------------------------------------------------------------

    def _reconcile_pods(self, rtype: str, replica: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        rt = rtype.lower()
        mine = [p for p in pods if p["metadata"]["labels"].get(REPLICA_TYPE) == rt]
        count = replica["replicas"]
        self.status.setdefault("replicaStatuses", {})[rtype] = {}
        slices: dict[int, list[dict[str, Any]]] = {}
        for pod in mine:
            slices.setdefault(int(pod["metadata"]["labels"].get(self.op.index_label, "-1")), []).append(pod)
        for index in range(max([count, *[i + 1 for i in slices]])):
            found = slices.get(index, [])
            if not found:
                self._create_pod(rtype, replica, index)
            elif len(found) == 1:
                self._check_pod(rtype, replica, found[0], index, count)

    def _check_pod(
        self, rtype: str, replica: dict[str, Any], pod: dict[str, Any], index: int, count: int
    ) -> None:
        if index >= count:
            self._delete(POD_TYPE, pod)
        exit_code = next(
            (
                s["state"]["terminated"]["exitCode"]
                for s in pod["status"].get("containerStatuses") or []
                if s["name"] == self.kind.container and "terminated" in (s.get("state") or {})
            ),
            0xBEEF,
        )
        policy = replica["restartPolicy"]
        if pod["status"].get("phase") == "Failed":
            retryable = 128 <= exit_code <= 255
            if policy in ("OnFailure", "Always") or (policy == "ExitCode" and retryable):
                self._delete(POD_TYPE, pod)
                cond.set_condition(
                    self.status,
                    cond.RESTARTING,
                    "True",
                    cond.reason(self.kind.kind, "Restarting"),
                    f"job {self.meta['name']} is restarting because {rtype} replica(s) failed.",
                    self.now,
                )
            elif policy == "ExitCode":
                cond.set_condition(
                    self.status,
                    cond.FAILED,
                    "True",
                    cond.reason(self.kind.kind, "Failed"),
                    f'job "{self.meta["name"]}" is failing because "{rtype}" replica(s) failed.',
                    self.now,
                )
        counts = self.status["replicaStatuses"][rtype]
        phase = pod["status"].get("phase")
        if phase == "Running":
            key = "failed" if pod["metadata"].get("deletionTimestamp") else "active"
        else:
            key = {"Succeeded": "succeeded", "Failed": "failed"}.get(phase or "", "")
        if key:
            counts[key] = counts.get(key, 0) + 1

    def _create_pod(self, rtype: str, replica: dict[str, Any], index: int) -> None:
        template = copy.deepcopy(replica.get("template") or {})
        meta = template.setdefault("metadata", {})
        meta.pop("creationTimestamp", None)
        labels = meta.setdefault("labels", {}) or {}
        meta["labels"] = labels
        labels.update(self._labels(rtype, index))
        if self._is_master(rtype, index):
            labels[JOB_ROLE] = "master"
        name = f"{self.meta['name']}-{rtype.lower()}-{index}"
        pod_spec = template.setdefault("spec", {})
        self._set_env(pod_spec, rtype, index)
        if pod_spec.get("restartPolicy"):
            self.api.record_event(
                self.job,
                "Warning",
                "SetPodTemplateRestartPolicy",
                "Restart policy in pod template will be overwritten by restart policy in replica spec",
                self.op.name,
            )
        policy = replica["restartPolicy"]
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**meta, "name": name, "ownerReferences": [self._owner()]},
            "spec": pod_spec,
        }
        try:
            self.api.create(POD_TYPE, self.meta["namespace"], body)
        except ApiError as error:
            if error.code != 409:
                self.api.record_event(self.job, "Warning", "FailedCreatePod", error.message, self.op.name)
                raise

    def _set_env(self, pod_spec: dict[str, Any], rtype: str, index: int) -> None:
        if self.kind is spec_rules.TFJOB:
            config = spec_rules.tf_config(self.job, self.spec, rtype, index)
            if config is None:
                return
            for container in pod_spec.get("containers") or []:
                if container.get("name") == self.kind.container:
                    container.setdefault("env", []).append({"name": "TF_CONFIG", "value": config})
                    return
            return
        extra = spec_rules.pytorch_env(self.job, self.spec, rtype, index)
        for container in pod_spec.get("containers") or []:
            container["env"] = (container.get("env") or []) + copy.deepcopy(extra)

    def _is_master(self, rtype: str, index: int) -> bool:
        leaders = ("Chief", "Master") if self.kind is spec_rules.TFJOB else ("Master",)
        if any(t in self.replicas for t in leaders):
            return rtype in leaders
        return rtype == "Worker" and index == 0

    def _labels(self, rtype: str, index: int) -> dict[str, str]:
        return {
            OPERATOR_NAME: self.kind.controller,
            JOB_NAME: self.meta["name"].replace("/", "-"),
            REPLICA_TYPE: rtype.lower(),
            self.op.index_label: str(index),
        }

    def _owner(self) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/v1",
            "kind": self.kind.kind,
            "name": self.meta["name"],
            "uid": self.meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _reconcile_services(self, rtype: str, replica: dict[str, Any]) -> None:
        rt = self.api.registry.by_key(*SERVICES)
        existing = {s["metadata"]["name"] for s in self._owned(SERVICES)}
        ports = [
            {"name": p["name"], "port": p["containerPort"]}
            for c in replica["template"]["spec"].get("containers") or []
            if c.get("name") == self.kind.container
            for p in c.get("ports") or []
            if p.get("name")
        ]
        for index in range(replica["replicas"]):
            name = f"{self.meta['name']}-{rtype.lower()}-{index}"
            if name in existing or rt is None:
                continue
            labels = self._labels(rtype, index)
            body = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "labels": labels, "ownerReferences": [self._owner()]},
                "spec": {"clusterIP": "None", "selector": labels, "ports": ports},
            }
            try:
                self.api.create(rt, self.meta["namespace"], body)
            except ApiError as error:
                if error.code != 409:
                    raise

    def _delete_pods(self, pods: list[dict[str, Any]]) -> None:
        """``DeletePodsAndServices``: every pod while running; once finished as ``cleanPodPolicy`` says."""
        policy = self.run_policy.get("cleanPodPolicy", "None")
        finished = cond.is_finished(self.status)
        if finished and policy == "None":
            return
        services = {s["metadata"]["name"]: s for s in self._owned(SERVICES)}
        for pod in pods:
            if finished and policy == "Running" and pod["status"].get("phase") not in ("Running", "Pending"):
                continue
            self._delete(POD_TYPE, pod)
            service = services.get(pod["metadata"]["name"])
            rt = self.api.registry.by_key(*SERVICES)
            if service is not None and rt is not None:
                self._delete(rt, service)

    def _delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if obj["metadata"].get("deletionTimestamp"):
            return
        try:
            self.api.delete(rt, obj["metadata"]["namespace"], obj["metadata"]["name"], DeleteOptions())
        except ApiError as error:
            if error.code != 404:
                raise

    def _ttl(self) -> None:
        ttl = self.run_policy.get("ttlSecondsAfterFinished")
        finished_at = self.status.get("completionTime")
        if ttl is None or self.run_policy.get("suspend") or finished_at is None:
            return
        if self.op.clock.now() >= parse_rfc3339(finished_at) + ttl:
            self._delete(self.rt, self.job)

    # ---- UpdateJobStatus -----------------------------------------------------------------------------

    def _update_job_status(self) -> None:
        self.status.setdefault("startTime", self.now)
        restarting = next(
            (c for c in self.status.get("conditions") or [] if c["type"] == cond.RESTARTING), None
        )
        order = self.kind.replica_types
        for rtype in [t for t in order if t in self.replicas] + [t for t in self.replicas if t not in order]:
            if self.kind is spec_rules.TFJOB:
                self._tf_status(rtype, restarting)
            elif self._pytorch_status(rtype):
                return

    def _succeed(self, message: str) -> None:
        self.status.setdefault("completionTime", self.now)
        cond.set_condition(
            self.status, cond.SUCCEEDED, "True", cond.reason(self.kind.kind, "Succeeded"), message, self.now
        )

    def _fail(self, message: str) -> None:
        self.status.setdefault("completionTime", self.now)
        cond.set_condition(
            self.status, cond.FAILED, "True", cond.reason(self.kind.kind, "Failed"), message, self.now
        )

    def _running(self, message: str) -> None:
        cond.set_condition(
            self.status, cond.RUNNING, "True", cond.reason(self.kind.kind, "Running"), message, self.now
        )

    def _tf_status(self, rtype: str, restarting: dict[str, Any] | None) -> None:
        counts = self.status["replicaStatuses"].get(rtype, {})
        expected = self.replicas[rtype]["replicas"] - counts.get("succeeded", 0)
        running, failed = counts.get("active", 0), counts.get("failed", 0)
        full = f"{self.meta['namespace']}/{self.meta['name']}"
        if any(t in self.replicas for t in ("Chief", "Master")):
            if rtype in ("Chief", "Master"):
                if running > 0:
                    self._running(f"TFJob {full} is running.")
                if expected == 0:
                    self._succeed(f"TFJob {full} successfully completed.")
        elif rtype == "Worker":
            if expected == 0 or (
                self._worker0_completed() and self.spec.get("successPolicy") != "AllWorkers"
            ):
                self._succeed(f"TFJob {full} successfully completed.")
            elif running > 0:
                self._running(f"TFJob {full} is running.")
        if failed > 0:
            if restarting is not None:
                cond.set_condition(
                    self.status,
                    cond.RESTARTING,
                    "True",
                    restarting["reason"],
                    restarting["message"],
                    self.now,
                )
            elif not (self.spec.get("enableDynamicWorker") and rtype == "Worker"):
                self._fail(f"TFJob {full} has failed because {failed} {rtype} replica(s) failed.")

    def _worker0_completed(self) -> bool:
        if "Worker" not in self.replicas:
            return True
        for pod in self._pods:
            labels = pod["metadata"]["labels"]
            if labels.get(REPLICA_TYPE) == "worker" and labels.get(self.op.index_label) == "0":
                codes = [
                    s["state"]["terminated"]["exitCode"]
                    for s in pod["status"].get("containerStatuses") or []
                    if s["name"] == "tensorflow" and "terminated" in s.get("state", {})
                ]
                return pod["status"].get("phase") == "Succeeded" and codes[:1] == [0]
        return False

    def _pytorch_status(self, rtype: str) -> bool:
        """PyTorch's per-type rules; True when the master succeeded (the upstream early return)."""
        counts = self.status["replicaStatuses"].setdefault(rtype, {})
        selector = {**self._labels(rtype, 0)}
        selector.pop(self.op.index_label)
        counts["selector"] = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        total = self.replicas[rtype]["replicas"]
        succeeded, running, failed = (
            counts.get("succeeded", 0),
            counts.get("active", 0),
            counts.get("failed", 0),
        )
        expected = total - succeeded
        name = self.meta["name"]
        if "Master" in self.replicas:
            if rtype == "Master":
                if running > 0:
                    self._running(f"PyTorchJob {name} is running.")
                if expected == 0:
                    self._succeed(f"PyTorchJob {name} is successfully completed.")
                    return True
        elif rtype == "Worker":
            if expected == 0 or (self.spec.get("elasticPolicy") is not None and succeeded > 0):
                self._succeed(f"PyTorchJob {self.meta['namespace']}/{name} successfully completed.")
            elif running > 0:
                self._running(f"PyTorchJob {self.meta['namespace']}/{name} is running.")
        if failed > 0 and total > succeeded + running:
            if self.replicas[rtype]["restartPolicy"] != "Never":
                cond.set_condition(
                    self.status,
                    cond.RESTARTING,
                    "True",
                    cond.reason("PyTorchJob", "Restarting"),
                    f"PyTorchJob {name} is restarting because {failed} {rtype} replica(s) failed.",
                    self.now,
                )
            else:
                self._fail(f"PyTorchJob {name} is failed because {failed} {rtype} replica(s) failed.")
        return False


def _active(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )
