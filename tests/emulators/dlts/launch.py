"""The job launcher's pod for a ``RegularJob``, run as a local :class:`~tests.emulators.container.Container`.

What the user's command sees follows ``Jobs_Templete/pod.yaml.template``, ``pod_template.py``, ``job.py`` and the
container's ``bootstrap.sh``/``init_user.sh``:

- mounts from the cluster's NFS export: ``/job`` (``work/<jobPath>``), ``/home/<alias>`` (``work/<alias>``),
  ``/work`` (``work/<workPath>``) and ``/data`` (``storage/<dataPath>``);
- the pod's environment (``DLWS_*``/``DLTS_*``, ``envs`` of the job, the job token) written to ``pod.env``
  by ``init_user.sh`` and sourced by the user's login shell (``HOME``/``PATH`` excepted, and the SSH private key);
- ``runuser -l <alias>``: the command starts in ``/home/<alias>``, its output is the pod's log, and
  ``bootstrap.sh`` ends the log with ``<date> : <exit code>``.

The command runs as this machine's user, not as the alias with the user's uid.
"""

from __future__ import annotations

import posixpath
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.emulators.container import Container, Mount, container_env
from tests.emulators.dlts.config import ClusterSpec, EmulatorConfig, alias_of, password_for
from tests.emulators.dlts.forwarder import Forwarder

POD_IP = "127.0.0.1"  # the process shares this machine's network, so services it opens are reached here
_REQUIRED = (
    "jobtrainingtype",
    "jobName",
    "jobPath",
    "workPath",
    "dataPath",
    "cmd",
    "userId",
    "resourcegpu",
    "userName",
    "vcName",
    "sku",
)


_NOT_EXPORTED = ("HOME", "INTERACTIVE", "LS_COLORS", "PATH", "PWD", "DLTS_SSH_PRIVATE_KEY")


class LaunchError(Exception):
    """``submit_job_impl`` raised: retried, and the job turns ``error`` after the last retry."""


class LaunchRefused(Exception):
    """``SetJobError`` and return: the job keeps its status (``queued``) with this ``errorMsg``."""


@dataclass
class Pod:
    container: Container
    log_path: Path
    started_at: float  # emulator clock
    exit_code: int | None = None
    detail: list[dict[str, Any]] | None = None  # the pod's status when its deletion began
    stopped: threading.Event = field(default_factory=threading.Event)
    services: dict[str, Forwarder] = field(default_factory=dict)  # endpoint id -> its NodePort

    def close_services(self) -> None:
        for service in self.services.values():
            service.close()
        self.services.clear()


def check_launchable(params: dict[str, Any]) -> None:
    """What ``submit_job_impl`` and ``generate_params`` refuse before a pod exists."""
    if "jobtrainingtype" not in params:
        raise LaunchError("'jobtrainingtype'")
    kind = params["jobtrainingtype"]
    if kind not in ("RegularJob", "PSDistJob", "InferenceJob"):
        raise LaunchRefused(f"ERROR: invalid jobtrainingtype: {kind}")
    if kind != "RegularJob":
        raise LaunchError(f"emulator: {kind} jobs are not emulated, only RegularJob")
    if any(key not in params for key in _REQUIRED):
        raise LaunchRefused("ERROR: Missing required parameters!")
    if not params.get("image"):
        # the pod's "image: null" gets a 422 from Kubernetes, and the launcher's handler then fails on e.message
        raise LaunchError("'ApiException' object has no attribute 'message'")


def role_index(pod_name: str) -> str:
    """``get_role_idx`` of the init container's ``sync.py`` (for a job id it is usually "0")."""
    inferred = pod_name.split("-")[-1]
    if inferred.isdigit():
        return inferred
    match = re.match("([a-z]+)([0-9]+)", inferred)
    return match.group(2) if match else "0"


def pod_variables(params: dict[str, Any], config: EmulatorConfig, gpu_ids: list[str]) -> dict[str, str]:
    """The environment the user's command gets, in the template's order (a later entry wins)."""
    job_id, email = str(params["jobId"]), str(params["userName"])
    user = config.user(email)
    alias, gpus = alias_of(email), int(params["resourcegpu"])
    uid, gid = (user.uid, user.gid) if user else (-1, -1)
    env: dict[str, str] = {"HOSTNAME": job_id, "FAMILY_TOKEN": str(params["familyToken"])}
    for prefix in ("DLWS", "DLTS"):
        env.update({f"{prefix}_JOB_ID": job_id, f"{prefix}_ROLE_NAME": "master"})
        env.update({f"{prefix}_NUM_PS": "0", f"{prefix}_NUM_WORKER": "1"})
    env["NVIDIA_VISIBLE_DEVICES"] = ",".join(gpu_ids)  # "" without GPUs; the device plugin's ids with them
    env.update(POD_NAME=job_id, POD_IP=POD_IP)
    for prefix in ("DLWS", "DLTS"):
        env.update({f"{prefix}_GID": str(gid), f"{prefix}_UID": str(uid), f"{prefix}_USER_NAME": alias})
        env.update({f"{prefix}_USER_EMAIL": email, f"{prefix}_VC_NAME": str(params["vcName"])})
    if params.get("hostNetwork") is True:
        env.update(DLWS_HOST_NETWORK="enable", DLTS_HOST_NETWORK="enable")
    env["DLTS_PREEMPTIBLE"] = "true" if params.get("preemptionAllowed") else "false"
    for entry in params.get("envs") or []:  # "envs", not "env": the template reads only this key
        if isinstance(entry, dict) and "name" in entry:
            env[str(entry["name"])] = str(entry.get("value", ""))
    env["DLTS_JOB_TOKEN"] = str(params.get("job_token") or password_for(email, config.master_token))
    env["DLWS_NUM_GPU_PER_WORKER"] = env["DLTS_NUM_GPU_PER_WORKER"] = str(gpus)
    if user is not None:
        env["DLTS_PUBLIC_SSH_KEY_1"] = user.ssh_public_key()
    env["DLTS_LAUNCH_CMD"] = str(params["cmd"])
    env.update(DLTS_SD_SELF_IP=POD_IP, DLTS_SD_SELF_SSH_PORT="22")  # init.env of the init container
    env["DLWS_ROLE_IDX"] = env["DLTS_ROLE_IDX"] = role_index(job_id)
    # init_user.sh leaves these prefixes out of pod.env, so the login shell never sees such variables
    env = {name: value for name, value in env.items() if not name.startswith(_NOT_EXPORTED)}
    env.update(HOME=f"/home/{alias}", USER=alias, LOGNAME=alias, SHELL="/bin/bash")  # runuser -l
    env["LD_LIBRARY_PATH"] = "/usr/local/nvidia/lib64/:"
    return env


def _user_mount(entry: Any, cluster: ClusterSpec) -> Mount | None:
    """A job's own ``mountpoints`` entry; invalid ones are skipped, as ``make_mountpoint`` does."""
    if not isinstance(entry, dict) or entry.get("enabled", True) is False or not entry.get("mountPath"):
        return None
    kind = entry.get("mountType", "hostPath")
    if kind == "nfs" and entry.get("server") and entry.get("path"):
        root = cluster.nfs_path.rstrip("/") + "/"
        path = posixpath.normpath(str(entry["path"]))
        if entry["server"] == cluster.nfs_server and (path + "/").startswith(root):
            return Mount(
                cluster.storage / path[len(root) :], str(entry["mountPath"]), bool(entry.get("readOnly"))
            )
    if kind in ("nfs", "hostPath", "blobfuse"):
        raise LaunchError(
            f"emulator: mountpoint {entry!r} is not emulated (only NFS under the cluster's export)"
        )
    return None


def pod_mounts(params: dict[str, Any], cluster: ClusterSpec) -> list[Mount]:
    alias = alias_of(str(params["userName"]))
    mounts = [
        Mount(cluster.work_root / params["jobPath"], "/job"),
        Mount(cluster.work_root / alias, f"/home/{alias}"),
        Mount(cluster.work_root / params["workPath"], "/work"),
        Mount(cluster.data_root / params["dataPath"], "/data"),
    ]
    taken = {m.target.strip("/") for m in mounts}
    for entry in params.get("mountpoints") or []:
        mount = _user_mount(entry, cluster)
        if mount is not None and mount.target.strip("/") not in taken:  # Job.add_mountpoints drops duplicates
            mounts.append(mount)
            taken.add(mount.target.strip("/"))
    return mounts


def missing_volumes(mounts: list[Mount]) -> list[Mount]:
    """NFS sources that do not exist: the kubelet cannot mount them and the pod stays ``ContainerCreating``.

    ``/job`` is a ``subPath``, which the kubelet creates, so it is never missing.
    """
    return [m for m in mounts if m.target != "/job" and not m.source.is_dir()]


def start_pod(
    params: dict[str, Any], mounts: list[Mount], env: dict[str, str], logs: Path, now: float
) -> Pod:
    mounts[0].source.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{params['jobId']}-{time.monotonic_ns()}.log"
    alias = alias_of(str(params["userName"]))
    container = Container(
        ["bash", "-c", str(params["cmd"])],
        env=container_env(env, home=f"/home/{alias}"),
        stdout=log_path,
        mounts=mounts,
        cwd=f"/home/{alias}",
    )
    container.start()
    return Pod(container=container, log_path=log_path, started_at=now)


def bootstrap_exit_line(code: int, now: float) -> str:
    """What ``bootstrap.sh`` echoes after the command: ``echo `date` ": ${EXIT_CODE}"``."""
    return time.strftime("%a %b %e %H:%M:%S UTC %Y", time.gmtime(now)) + f" : {code}\n"


__all__ = [
    "POD_IP",
    "LaunchError",
    "LaunchRefused",
    "Pod",
    "bootstrap_exit_line",
    "check_launchable",
    "missing_volumes",
    "pod_mounts",
    "pod_variables",
    "role_index",
    "start_pod",
]
