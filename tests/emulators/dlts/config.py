"""What the emulated DLTS installation holds: its clusters, teams (VCs), users and the dashboard's master token.

DLTS keeps users, ACLs and VCs in its MySQL database and the dashboard's ``masterToken`` in its config file; here
they are plain dataclasses given to :class:`~tests.emulators.dlts.DltsEmulator`.

Permissions follow ``src/utils/authorization.py``: ``User`` < ``Collaborator`` < ``Admin`` on a VC. An email
the ACL does not know still authenticates at the dashboard (the password is only an md5 of the email), and is
then refused by the backend ("Access Denied!", ``{}``, ...), as on DLTS.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass, field
from pathlib import Path

PERMISSIONS = {"User": 1, "Collaborator": 2, "Admin": 3}


def generate_token(email: str, master_token: str) -> bytes:
    """``User.generateToken``: md5 of ``"<email>:<masterToken>"`` (the dashboard password is its hex form)."""
    return hashlib.md5(f"{email}:{master_token}".encode()).digest()


def password_for(email: str, master_token: str) -> str:
    return generate_token(email, master_token).hex()


def node_hex_decode(text: str) -> bytes:
    """``Buffer.from(text, 'hex')`` of Node: decodes pairs of hex digits and silently stops at the first bad pair.

    So the dashboard accepts upper-case digits, and anything after a valid 32-digit token; tests pin that.
    """
    out = bytearray()
    for i in range(0, len(text) - 1, 2):
        pair = text[i : i + 2]
        if not all(c in string.hexdigits for c in pair):
            break
        out.append(int(pair, 16))
    return bytes(out)


def alias_of(email: str) -> str:
    """``getAlias`` of JobRestAPIUtils: the part before ``@`` (and after a ``DOMAIN/``)."""
    name = email
    if "@" in name:
        name = name.split("@")[0].strip()
    if "/" in name:
        name = name.split("/")[1].strip()
    return name


@dataclass(frozen=True)
class User:
    email: str
    teams: dict[str, str]  # team (VC) name -> "User" | "Collaborator" | "Admin"
    uid: int = 20001
    gid: int = 20000
    public_key: str = ""

    @property
    def alias(self) -> str:
        return alias_of(self.email)

    def ssh_public_key(self) -> str:
        return self.public_key or f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDLTSEMULATOR {self.alias}@dlts"


@dataclass(frozen=True)
class Team:
    """A VC: its GPU model and quota (``quota``/``metadata`` columns of the ``vc`` table, as JSON strings)."""

    name: str
    gpu_type: str = "P40"
    gpus: int = 8  # the VC's GPU quota; jobs beyond it stay queued
    gpus_per_node: int = 4
    user_quota: int | None = None  # metadata "user_quota": GPUs a user may hold before admin approval

    def quota_json(self) -> str:
        return json.dumps({self.gpu_type: self.gpus}, separators=(",", ":"))

    def metadata_json(self) -> str:
        meta: dict[str, object] = {self.gpu_type: {"num_gpu_per_node": self.gpus_per_node}}
        if self.user_quota is not None:
            meta["user_quota"] = self.user_quota
        return json.dumps(meta, separators=(",", ":"))

    @property
    def sku(self) -> str:
        return f"Standard_{self.gpu_type}"


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster of the dashboard's config, with the directory standing in for its NFS export.

    ``<storage>/work`` is the export's ``work`` folder (job, work and home paths) and ``<storage>/storage`` its
    ``storage`` folder (the data path), as ``GetStoragePath`` and ``Job.*_nfs_mountpoint`` lay them out.
    """

    name: str
    storage: Path
    nfs_server: str = "nfs.dlts.emulated"
    nfs_path: str = "/data/share"
    domain: str = ""  # config["domain"]: what GET .../endpoints reports next to nodeName

    @property
    def work_root(self) -> Path:
        return self.storage / "work"

    @property
    def data_root(self) -> Path:
        return self.storage / "storage"


#: how long each state lasts at least (seconds on the emulator's clock) before the manager moves a job on
DEFAULT_DELAYS = {
    "unapproved": 0.05,
    "queued": 0.05,
    "scheduling": 0.05,
    "running": 0.0,
    "killing": 0.05,
    "pausing": 0.05,
}


@dataclass
class EmulatorConfig:
    clusters: list[ClusterSpec]
    teams: list[Team]
    users: list[User]
    master_token: str
    delays: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_DELAYS))
    # every transient state must be read by a client at least once before the job leaves it
    wait_for_poll: bool = True
    auto_approve: bool = True  # job_manager approves jobs within quota; False leaves them for PUT "approved"
    log_backend: str = "elasticsearch"  # or "legacy": the whole log from the DB, cursor null
    kill_grace: float = 1.0  # pods are deleted with grace period 0, which the API server turns into 1 s
    launch_retries: int = 5  # AddandGetJobRetries: launch errors before a job turns "error"

    def user(self, email: str) -> User | None:
        return next((u for u in self.users if u.email == email), None)

    def team(self, name: str) -> Team | None:
        return next((t for t in self.teams if t.name == name), None)

    def has_access(self, email: str, team: str, permission: str) -> bool:
        user = self.user(email)
        if user is None or team not in user.teams:
            return False
        return PERMISSIONS[user.teams[team]] >= PERMISSIONS[permission]

    def cluster(self, cluster_id: str) -> ClusterSpec | None:
        """``new Cluster(context, id)``: ``.default`` is the first configured cluster."""
        if cluster_id == ".default":
            return self.clusters[0] if self.clusters else None
        return next((c for c in self.clusters if c.name == cluster_id), None)


__all__ = [
    "DEFAULT_DELAYS",
    "PERMISSIONS",
    "ClusterSpec",
    "EmulatorConfig",
    "Team",
    "User",
    "alias_of",
    "generate_token",
    "node_hex_decode",
    "password_for",
]
