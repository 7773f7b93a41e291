"""A task's life inside a framework attempt, as FrameworkController moves it.

AttemptCreationPending → AttemptCreationRequested (pod created) → AttemptPreparing (pod pending until the VC
admits it) → AttemptRunning (container started) → AttemptDeletionPending (the command ended: completion set) →
AttemptDeletionRequested (pod deleted) → AttemptDeleting (until no process is left) → AttemptCompleted → Completed,
or a new task attempt (``taskRetryCount``, only with ``extras.gangAllocation: false``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import completion as fc
from .capacity import Resources
from .model import Framework, RoleSpec, Task, TaskAttempt, new_uid

if TYPE_CHECKING:
    from .cluster import Cluster


def resources(role: RoleSpec) -> Resources:
    return Resources(role.cpu, role.memory_mb, role.gpu)


def new_task(role: RoleSpec, index: int, now: float) -> Task:
    return Task(
        role=role.fc_name,
        index=index,
        instance_uid=f"{index}_{new_uid()}",
        state="AttemptCreationPending",
        entered=now,
        start_time=now,
        attempt=TaskAttempt(id=0, start_time=now),
    )


class TaskStepper:
    """Moves the tasks of a framework's current attempt one state at a time."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def step(self, fw: Framework, task: Task, now: float) -> None:
        handler: Callable[[Framework, Task, float], None] | None = getattr(
            self, "_" + task.state.replace("Attempt", "attempt_").lower(), None
        )
        if handler is not None:
            handler(fw, task, now)

    @staticmethod
    def _move(task: Task, state: str, now: float) -> None:
        task.state = state
        task.entered = now

    def _attempt_creationpending(self, fw: Framework, task: Task, now: float) -> None:
        pod = task.attempt
        pod.pod_uid = new_uid()
        pod.pod_name = f"{fw.debug_id}-{task.role}-{task.index}"
        pod.instance_uid = f"{pod.id}_{pod.pod_uid}"
        self._move(task, "AttemptCreationRequested", now)

    def _attempt_creationrequested(self, fw: Framework, task: Task, now: float) -> None:
        self._move(task, "AttemptPreparing", now)

    def _attempt_preparing(self, fw: Framework, task: Task, now: float) -> None:
        pass  # admission is decided for the whole attempt (see admit)

    def admit(self, fw: Framework, waiting: list[Task], now: float) -> None:
        """Start the pods of ``waiting`` together once the virtual cluster has room for all of them."""
        request = Resources()
        for task in waiting:
            request = request + resources(fw.role(task.role))
        if not self.cluster.quota.try_admit(fw.virtual_cluster, request):
            return
        for task in waiting:
            task.attempt.admitted = True
            task.attempt.pod_host_ip = self.cluster.config.host_ip
            task.attempt.pod_node_name = "pai-worker-0"
        for task in waiting:
            if not self.cluster.start_pod(fw, task):  # refused: completes as a PodCreationPermanentError
                self._move(task, "AttemptDeletionPending", now)
                continue
            task.attempt.run_time = now
            task.run_time = task.run_time or now
            self._move(task, "AttemptRunning", now)

    def _attempt_running(self, fw: Framework, task: Task, now: float) -> None:
        info = self.cluster.kubelet.finished(task.attempt.pod_uid)
        if info is None:
            return
        task.attempt.completion = fc.pod_finished(info.container_code, info.message)
        self._move(task, "AttemptDeletionPending", now)

    def _attempt_deletionpending(self, fw: Framework, task: Task, now: float) -> None:
        self.cluster.kubelet.delete(task.attempt.pod_uid)
        self._move(task, "AttemptDeletionRequested", now)

    def _attempt_deletionrequested(self, fw: Framework, task: Task, now: float) -> None:
        self._move(task, "AttemptDeleting", now)

    def _attempt_deleting(self, fw: Framework, task: Task, now: float) -> None:
        if not self.cluster.kubelet.gone(task.attempt.pod_uid):
            return
        self.release(fw, task)
        task.attempt.completion_time = now
        self._move(task, "AttemptCompleted", now)

    def _attempt_completed(self, fw: Framework, task: Task, now: float) -> None:
        role = fw.role(task.role)
        result = task.attempt.completion
        assert result is not None
        retry, counted = fc.should_retry(result, task.accountable_retried, role.max_task_retries)
        if not retry:
            task.completion_time = now
            self._move(task, "Completed", now)
            return
        task.history.insert(0, ("AttemptCompleted", copy.deepcopy(task.attempt)))
        task.total_retried += 1
        task.accountable_retried += int(counted)
        task.attempt = TaskAttempt(id=task.attempt.id + 1, start_time=now)
        self._move(task, "AttemptCreationPending", now)

    def release(self, fw: Framework, task: Task) -> None:
        if task.attempt.admitted:
            task.attempt.admitted = False
            self.cluster.quota.release(fw.virtual_cluster, resources(fw.role(task.role)))

    def finish(self, fw: Framework, task: Task, now: float) -> None:
        """End a task whose framework attempt completed: its pod is gone, it will not be retried."""
        self.release(fw, task)
        if task.attempt.completion is None:
            task.attempt.completion = fc.attempt_completion()
        if task.state != "Completed":
            task.attempt.completion_time = task.attempt.completion_time or now
            task.completion_time = now
            self._move(task, "Completed", now)


__all__ = ["TaskStepper", "new_task", "resources"]
