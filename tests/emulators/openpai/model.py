"""A job as FrameworkController keeps it: the framework, its current attempt, each task and task attempt.

The rest server builds every answer from this status (``models/v2/job/k8s.js``), so the emulator keeps the same
fields: FC states (``AttemptCreationPending`` ... ``Completed``), completion statuses with code, phrase, type and
diagnostics, uids, pod names and host IPs, retry counters, and the snapshots of earlier attempts.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from .protocol import Protocol

TERMINAL = "Completed"
RUNNING_TASK_STATES = (
    "AttemptRunning",
    "AttemptDeletionPending",
    "AttemptDeletionRequested",
    "AttemptDeleting",
)


def encode_name(framework_name: str) -> str:
    """The Kubernetes name of a framework: md5 of ``user~job`` (``models/v2/utils/name.js``)."""
    return hashlib.md5(framework_name.encode()).hexdigest()


def convert_name(name: str) -> str:
    """A task role's name as FrameworkController sees it: lower case, alphanumerics only."""
    return "".join(c for c in name.lower() if c.isascii() and c.isalnum())


def new_uid() -> str:
    return str(uuid.uuid4())


@dataclass
class Completion:
    code: int
    phrase: str
    type_name: str  # Succeeded or Failed
    attributes: list[str]  # Transient, Permanent, ...; empty when unknown
    diagnostics: str
    trigger: dict[str, Any] | None = None  # {message, taskRoleName, taskIndex}

    @property
    def succeeded(self) -> bool:
        return self.type_name == "Succeeded"


@dataclass
class TaskAttempt:
    id: int
    start_time: float
    instance_uid: str | None = None
    pod_name: str | None = None
    pod_uid: str | None = None
    pod_node_name: str | None = None
    pod_host_ip: str | None = None
    run_time: float | None = None
    completion_time: float | None = None
    completion: Completion | None = None
    admitted: bool = False  # holds its resources in the virtual cluster


@dataclass
class Task:
    role: str  # the role's FrameworkController name
    index: int
    instance_uid: str
    state: str
    entered: float
    start_time: float
    attempt: TaskAttempt
    run_time: float | None = None
    completion_time: float | None = None
    total_retried: int = 0
    accountable_retried: int = 0
    history: list[tuple[str, TaskAttempt]] = field(default_factory=list)  # (state, attempt), newest first


@dataclass
class RoleSpec:
    """One task role as the framework runs it."""

    name: str  # as the protocol names it (PAI_CURRENT_TASK_ROLE_NAME, PAI_TASK_ROLE_TASK_COUNT_<name>)
    fc_name: str  # as FrameworkController names it: the job detail's keys, FC_TASKROLE_NAME, PAI_HOST_IP_<fc_name>_<i>
    instances: int
    min_failed: int  # -1: never fail the attempt by count
    min_succeeded: int  # -1: never succeed it by count
    max_task_retries: int  # only with extras.gangAllocation false
    cpu: int
    memory_mb: int
    gpu: int
    entrypoint: str
    ports: dict[str, int]  # label -> count, with ssh and http added


@dataclass
class Attempt:
    id: int
    start_time: float
    instance_uid: str | None = None
    run_time: float | None = None
    completion_time: float | None = None
    completion: Completion | None = None
    tasks: dict[str, list[Task]] = field(default_factory=dict)
    state: str = "AttemptCreationPending"  # the framework's state when this snapshot was taken (history only)

    def all_tasks(self) -> list[Task]:
        return [task for tasks in self.tasks.values() for task in tasks]


@dataclass
class Framework:
    name: str  # user~job
    user: str
    job_name: str
    virtual_cluster: str
    protocol: Protocol
    config_text: str  # the submitted text with secrets masked, as kept in the framework's annotation
    roles: list[RoleSpec]
    max_retries: int
    submission_time: float
    state: str
    entered: float
    mounts: list[dict[str, Any]] = field(default_factory=list)  # resolved extras.storages
    uid: str = field(default_factory=new_uid)
    execution_type: str = "Start"
    creation_time: float | None = None
    run_time: float | None = None
    completion_time: float | None = None
    attempt: Attempt | None = None  # None until FrameworkController picks the framework up
    history: list[Attempt] = field(default_factory=list)  # earlier attempts, oldest first
    total_retried: int = 0
    accountable_retried: int = 0
    tags: list[str] = field(default_factory=list)
    seen: bool = False  # a GET returned the current state
    hidden_gets: int = 0  # fault: GETs still answered 404 right after create

    @property
    def debug_id(self) -> str:
        return encode_name(self.name)

    @property
    def completed(self) -> bool:
        return self.state == TERMINAL

    def total_gpu(self) -> int:
        return sum(role.gpu * role.instances for role in self.roles)

    def total_tasks(self) -> int:
        return sum(role.instances for role in self.roles)

    def role(self, name: str) -> RoleSpec:
        return next(role for role in self.roles if role.fc_name == name)


__all__ = [
    "RUNNING_TASK_STATES",
    "TERMINAL",
    "Attempt",
    "Completion",
    "Framework",
    "RoleSpec",
    "Task",
    "TaskAttempt",
    "convert_name",
    "encode_name",
    "new_uid",
]
