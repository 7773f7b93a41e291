"""FrameworkController and the rest of the cluster's machinery for one framework, one state at a time.

Per attempt: AttemptCreationPending → AttemptCreationRequested → AttemptPreparing → AttemptRunning →
AttemptDeletionPending → AttemptDeletionRequested → AttemptDeleting → AttemptCompleted → Completed, or a new
attempt (``jobRetryCount``) that starts again at AttemptCreationPending with ``attemptId`` + 1.

The completion policy of each role decides when an attempt completes: ``minFailedInstances`` failed tasks fail
it, ``minSucceededInstances`` succeeded tasks succeed it (``-1``: never by count), else it succeeds once every
task completed. A STOP completes it with -210; tasks still running get -220 and their pods are deleted. Every
state lasts at least its configured delay (and, with ``hold_until_seen``, until a GET has returned it).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from . import completion as fc
from .model import Attempt, Completion, Framework, Task
from .tasks import TaskStepper, new_task

if TYPE_CHECKING:
    from .cluster import Cluster


class Controller:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.tasks = TaskStepper(cluster)

    def _ready(self, fw: Framework, now: float) -> bool:
        timing = self.cluster.config.timing
        if now - fw.entered < timing.delays.get(fw.state, 0.0):
            return False
        return fw.seen or not timing.hold_until_seen

    @staticmethod
    def _move(fw: Framework, state: str, now: float) -> None:
        fw.state = state
        fw.entered = now
        fw.seen = False

    def step(self, fw: Framework, now: float) -> None:
        if fw.state in ("AttemptPreparing", "AttemptRunning"):
            self._live(fw, now)
            return
        if not self._ready(fw, now):
            return
        getattr(self, "_" + fw.state.replace("Attempt", "attempt_").lower())(fw, now)

    def _attempt_creationpending(self, fw: Framework, now: float) -> None:
        if fw.attempt is None:  # FrameworkController picks up what the rest server wrote
            fw.creation_time = now
            fw.attempt = _new_attempt(fw, 0, now)
        if fw.execution_type == "Stop":
            self._complete(fw, fc.stop_requested(), now, force=True)
            return
        fw.attempt.instance_uid = f"{fw.attempt.id}_{fw.uid}"
        self._move(fw, "AttemptCreationRequested", now)

    def _attempt_creationrequested(self, fw: Framework, now: float) -> None:
        self._move(fw, "AttemptPreparing", now)

    def _live(self, fw: Framework, now: float) -> None:
        attempt = fw.attempt
        assert attempt is not None
        if fw.execution_type == "Stop":
            self._complete(fw, fc.stop_requested(), now, force=False)
            return
        for task in attempt.all_tasks():
            self.tasks.step(fw, task, now)
        self._admit(fw, attempt, now)
        if not self._ready(fw, now):
            return
        if fw.state == "AttemptPreparing" and any(task.run_time is not None for task in attempt.all_tasks()):
            attempt.run_time = now
            fw.run_time = fw.run_time or now
            self._move(fw, "AttemptRunning", now)
            return
        result = self._policy(fw, attempt)
        if result is not None:
            self._complete(fw, result, now, force=False)

    def _admit(self, fw: Framework, attempt: Attempt, now: float) -> None:
        tasks = attempt.all_tasks()
        waiting = [t for t in tasks if t.state == "AttemptPreparing" and not t.attempt.admitted]
        if not waiting:
            return
        if all(t.run_time is None for t in tasks):  # the first start is all or nothing
            if len(waiting) == len(tasks):
                self.tasks.admit(fw, waiting, now)
            return
        for task in waiting:  # a retried task comes back alone
            self.tasks.admit(fw, [task], now)

    def _policy(self, fw: Framework, attempt: Attempt) -> Completion | None:
        """FrameworkController's syncFrameworkAttemptCompletionPolicy."""
        first: tuple[float, Completion] | None = None
        for role in fw.roles:
            done = sorted(
                (t for t in attempt.tasks.get(role.fc_name, []) if t.state == "Completed"),
                key=lambda t: (t.completion_time or 0.0, t.index),
            )
            failed = [t for t in done if not _succeeded(t)]
            succeeded = [t for t in done if _succeeded(t)]
            for minimum, chosen, make in (
                (role.min_failed, failed, fc.failed_trigger),
                (role.min_succeeded, succeeded, fc.succeeded_trigger),
            ):
                if minimum >= 1 and len(chosen) >= minimum:
                    trigger = chosen[minimum - 1]
                    when = trigger.completion_time or 0.0
                    if first is None or when < first[0]:
                        first = (when, make(trigger, len(chosen), minimum))
        if first is not None:
            return first[1]
        tasks = attempt.all_tasks()
        done = [t for t in tasks if t.state == "Completed"]
        if tasks and len(done) == len(tasks):
            last = max(done, key=lambda t: (t.completion_time or 0.0, t.index))
            return fc.all_completed(last, len(done), len(tasks))
        return None

    def _complete(self, fw: Framework, result: Completion, now: float, force: bool) -> None:
        """FrameworkController's completeFrameworkAttempt."""
        attempt = fw.attempt
        assert attempt is not None
        if attempt.completion is None:
            attempt.completion = result
        for task in attempt.all_tasks():
            if task.attempt.completion is None:
                task.attempt.completion = fc.attempt_completion()
        if force:
            for task in attempt.all_tasks():
                self.tasks.finish(fw, task, now)
            attempt.completion_time = now
            self._move(fw, "AttemptCompleted", now)
        else:
            self._move(fw, "AttemptDeletionPending", now)

    def _attempt_deletionpending(self, fw: Framework, now: float) -> None:
        assert fw.attempt is not None
        for task in fw.attempt.all_tasks():
            self.cluster.kubelet.delete(task.attempt.pod_uid)
        self._move(fw, "AttemptDeletionRequested", now)

    def _attempt_deletionrequested(self, fw: Framework, now: float) -> None:
        self._move(fw, "AttemptDeleting", now)

    def _attempt_deleting(self, fw: Framework, now: float) -> None:
        attempt = fw.attempt
        assert attempt is not None
        if not all(self.cluster.kubelet.gone(task.attempt.pod_uid) for task in attempt.all_tasks()):
            return
        for task in attempt.all_tasks():
            self.tasks.finish(fw, task, now)
        attempt.completion_time = now
        self._move(fw, "AttemptCompleted", now)

    def _attempt_completed(self, fw: Framework, now: float) -> None:
        attempt = fw.attempt
        assert attempt is not None and attempt.completion is not None
        retry, counted = fc.should_retry(attempt.completion, fw.accountable_retried, fw.max_retries)
        if fw.execution_type == "Stop" or not retry:
            fw.completion_time = now
            self._move(fw, "Completed", now)
            return
        snapshot = copy.deepcopy(attempt)
        snapshot.state = "AttemptCompleted"
        fw.history.append(snapshot)
        fw.total_retried += 1
        fw.accountable_retried += int(counted)
        fw.attempt = _new_attempt(fw, attempt.id + 1, now)
        self._move(fw, "AttemptCreationPending", now)


def _new_attempt(fw: Framework, attempt_id: int, now: float) -> Attempt:
    tasks = {role.fc_name: [new_task(role, i, now) for i in range(role.instances)] for role in fw.roles}
    return Attempt(id=attempt_id, start_time=now, tasks=tasks)


def _succeeded(task: Task) -> bool:
    return task.attempt.completion is not None and task.attempt.completion.succeeded


__all__ = ["Controller"]
