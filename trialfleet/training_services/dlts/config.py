"""``platform: dlts``: Microsoft DLTS (DLWorkspace), one dashboard job per trial attempt."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from trialfleet.config.base import ConfigPath, Duration, Secret, existing
from trialfleet.config.service import DEFAULT_IMAGE, MANAGER_IP_UNUSED, TrainingServiceConfig

#: where DLTS mounts the user's work path in every job (``workPath`` left empty: the user's own directory)
DEFAULT_CONTAINER_MOUNT = "/work"


class DltsConfig(TrainingServiceConfig):
    """Microsoft DLTS, removed from NNI before 3.0 (NNI's v1 ``dltsConfig`` and ``trial.image``).

    ``email``, ``password`` and ``team`` fall back on the variables DLTS sets inside its own jobs
    (``DLWS_USER_EMAIL``, ``DLTS_JOB_TOKEN``, ``DLWS_VC_NAME``), as NNI did for a manager run in a DLTS job.
    ``gpu_type`` unset: the first GPU model of the team's virtual cluster, as NNI read it.

    The storage: trial directories and the code copy live on the cluster's NFS, which this machine mounts at
    ``local_storage_mount_point`` and jobs see at ``container_storage_mount_point`` (their ``/work``). Both
    unset: the experiment's working directory is on that storage at the same path in jobs, as NNI assumed (a
    manager run in a DLTS job sees ``/work`` and ``/home/<alias>`` as its trials do).
    """

    platform: Literal["dlts"] = "dlts"
    """`dlts`."""
    dashboard: str
    """The dashboard URL (a missing scheme means `http://`, a missing trailing slash is added)."""
    image: str = DEFAULT_IMAGE
    """The jobs' image."""
    cluster: str = ".default"  # DLTS's name for the dashboard's first cluster
    """The cluster's id on the dashboard; `.default` is its first cluster."""
    team: str | None = None
    """The team (virtual cluster) jobs run in; default `$DLWS_VC_NAME`."""
    email: str | None = None
    """The DLTS user; default `$DLWS_USER_EMAIL`."""
    password: Secret | None = None
    """The user's DLTS token; default `$DLTS_JOB_TOKEN`."""
    gpu_type: str | None = None
    """The `gpuType` sent with each job; unset: the team's first GPU model."""
    preemption_allowed: bool = False
    """Let DLTS preempt trial jobs (each preemption ends the attempt as an infrastructure failure)."""
    local_storage_mount_point: ConfigPath | None = None
    """Where this machine mounts the user's work path."""
    container_storage_mount_point: str | None = Field(default=None, pattern=r"^/")
    """Where jobs see it (`/work` when `localStorageMountPoint` is set)."""
    reuse_mode: bool = False
    """Run trials in long-lived worker jobs, trial after trial, instead of one job per trial (docs/reuse.md)."""
    worker_idle_timeout: Duration = Field(default=60, gt=0)
    """With `reuseMode`: how long a worker job with no trial is kept before it is released (e.g. `5m`)."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset(
        {"gpu_type", "preemption_allowed", "local_storage_mount_point", "container_storage_mount_point"}
        | {"reuse_mode", "worker_idle_timeout"}  # NNI's DLTS ran one job per trial
    )
    not_acted_on: ClassVar[dict[str, str]] = {
        **TrainingServiceConfig.not_acted_on,
        "nni_manager_ip": MANAGER_IP_UNUSED + " on the cluster's storage",
    }

    _check_mount = field_validator("local_storage_mount_point")(
        existing("directory", "local storage mount point")
    )

    @field_validator("dashboard")
    @classmethod
    def _with_slash(cls, dashboard: str) -> str:
        """NNI appended ``api/...`` to the dashboard URL as written, so NNI configs end it with a slash."""
        dashboard = dashboard if "://" in dashboard else f"http://{dashboard}"
        return dashboard if dashboard.endswith("/") else dashboard + "/"

    @model_validator(mode="after")
    def _mount_pair(self) -> DltsConfig:
        if self.local_storage_mount_point is not None and self.container_storage_mount_point is None:
            self.container_storage_mount_point = DEFAULT_CONTAINER_MOUNT
        return self
