"""What an OpenPAI cluster's admin configures, as the emulator takes it: users, virtual clusters, storages.

On a real cluster users get virtual clusters and storages through their groups, and storages are PVCs bound to
NFS/Azure volumes. Here each user lists the VCs and storages it may use, and each storage names the directory of
this machine that stands for its volume (what a task sees at the storage's mount path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: FrameworkController states a framework stays in for at least the given seconds (AttemptRunning lasts as long as
#: its tasks run); 50 ms lets a client polling every few tens of milliseconds see each of them
DEFAULT_DELAYS = {
    "AttemptCreationPending": 0.05,
    "AttemptCreationRequested": 0.05,
    "AttemptPreparing": 0.05,
    "AttemptRunning": 0.05,
    "AttemptDeletionPending": 0.05,
    "AttemptDeletionRequested": 0.05,
    "AttemptDeleting": 0.05,
    "AttemptCompleted": 0.05,
}


@dataclass
class Storage:
    name: str
    path: Path  # the directory of this machine behind the storage's volume
    share: bool = True  # False: each user sees its own subdirectory (subPath = username)
    read_only: bool = False
    server: str = "10.0.0.1"  # what GET /storages/{name} reports as the NFS server and export
    export: str = ""

    def detail(self) -> dict[str, Any]:
        return {
            "type": "nfs",
            "data": {"server": self.server, "path": self.export or f"/data/{self.name}"},
            "readOnly": self.read_only,
            "mountOptions": None,
        }


@dataclass
class VirtualCluster:
    name: str
    cpu: int = 64
    memory: int = 256 * 1024  # MB
    gpu: int = 8


@dataclass
class User:
    name: str
    password: str = "openpai-password"
    admin: bool = False
    virtual_clusters: list[str] = field(default_factory=lambda: ["default"])
    storages: list[str] | None = None  # None: every configured storage
    default_storages: list[str] | None = None  # None: the same as storages
    tokens: list[str] = field(
        default_factory=list
    )  # extra bearer tokens accepted for the user, never expiring


@dataclass
class Limits:
    api_per_min: int = 600  # per client address, every route
    list_job_per_min: int = 60  # per user, GET /jobs
    submit_job_per_hour: int = 60  # per user, POST /jobs (counted before the protocol is checked)
    list_max: int = 50000
    list_default: int = 5000
    body_bytes: int = 100 * 1024  # body-parser's default limit for json and text bodies


@dataclass
class Timing:
    delays: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DELAYS))
    hold_until_seen: bool = False  # a state also waits until a GET has returned it
    tick: float = 0.01  # how often the controller looks at every job (real seconds)
    stop_grace: float = 2.0  # SIGTERM to SIGKILL when pods are deleted (the cluster uses 600 s)


@dataclass
class ClusterConfig:
    users: list[User] = field(default_factory=lambda: [User("admin", admin=True), User("alice")])
    virtual_clusters: list[VirtualCluster] = field(default_factory=lambda: [VirtualCluster("default")])
    storages: list[Storage] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    timing: Timing = field(default_factory=Timing)
    name: str = "emulated-openpai"
    version: str = "v1.8.0"
    host_ip: str = "127.0.0.1"  # the node every task runs on (podHostIP, PAI_HOST_IP_*)
    log_manager_port: int = 9103
    schedule_port_start: int = 15000
    schedule_port_end: int = 40000
    token_lifetime: float = 7 * 24 * 3600  # JWT_TOKEN_EXPIRE_TIME, 7d

    def user(self, name: str) -> User | None:
        return next((user for user in self.users if user.name == name), None)

    def storage(self, name: str) -> Storage | None:
        return next((storage for storage in self.storages if storage.name == name), None)

    def user_storages(self, user: User, defaults_only: bool = False) -> list[Storage]:
        names = (
            user.default_storages if defaults_only and user.default_storages is not None else user.storages
        )
        return [s for s in self.storages if names is None or s.name in names]


__all__ = ["DEFAULT_DELAYS", "ClusterConfig", "Limits", "Storage", "Timing", "User", "VirtualCluster"]
