"""The environment a PAI task's container starts with.

Three sources, as on a cluster:
- the rest server's framework and task-role variables (``models/v2/job/runtime-env.js``, ``k8s.js``):
  ``PAI_JOB_NAME`` (which is ``user~job``), ``PAI_USER_NAME``, ``PAI_TASK_ROLE_TASK_COUNT_<role>``, ...;
- FrameworkController's ``FC_*`` variables of the pod;
- the runtime's ``framework_parser.py genenv`` once every task has a pod: ``PAI_HOST_IP_<role>_<i>``,
  ``PAI_PORT_LIST_<role>_<i>_<label>`` (ports hashed from the pod uid), ``PAI_CONTAINER_HOST_*``, ...
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .config import ClusterConfig
from .jscompat import string
from .model import Framework, RoleSpec, Task


def _truthy_or(value: Any, default: int) -> Any:
    # JavaScript `x ? x : default`: 0 and null fall back, -1 stays
    return value if value not in (None, 0, False) else default


def framework_env(fw: Framework) -> dict[str, str]:
    roles = fw.protocol.task_roles
    user = fw.name.split("~")[0]
    env: dict[str, Any] = {
        "PAI_FRAMEWORK_NAME": fw.name,
        "PAI_JOB_NAME": fw.name,
        "PAI_USER_NAME": user,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_TASK_ROLE_COUNT": len(roles),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "PAI_VIRTUAL_CLUSTER": fw.virtual_cluster,
    }
    tasks = 0
    for name, role in roles.items():
        instances = _truthy_or(role.get("instances"), 1)
        tasks += instances
        resources = role["resourcePerInstance"]
        options = role.get("extraContainerOptions") or {}
        shm = options.get("shmMB", 0)
        env[f"PAI_TASK_ROLE_TASK_COUNT_{name}"] = instances
        env[f"PAI_RESOURCE_{name}"] = ",".join(
            string(x) for x in (resources["gpu"], resources["cpu"], resources["memoryMB"], shm)
        )
        completion = role.get("completion") or {}
        env[f"PAI_MIN_FAILED_TASK_COUNT_{name}"] = _truthy_or(completion.get("minFailedInstances"), 1)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{name}"] = _truthy_or(
            completion.get("minSucceededInstances"), instances
        )
    env.update(
        {
            "PAI_USERNAME": user,
            "PAI_TASKS_NUM": tasks,
            "PAI_JOB_TASK_COUNT": tasks,
            "PAI_TASK_ROLES_NUM": len(roles),
            "PAI_JOB_TASK_ROLE_COUNT": len(roles),
            "PAI_JOB_TASK_ROLE_LIST": ",".join(roles),
        }
    )
    return {key: string(value) for key, value in env.items()}


def hashed_ports(pod_uid: str, label: str, count: int, start: int, end: int) -> list[str]:
    """``getContainerPorts`` / the runtime's ``generate_hashed_ports_num``: md5 of ``[uid][label][i]``."""
    ports = []
    for index in range(count):
        digest = hashlib.md5(f"[{pod_uid}][{label}][{index}]".encode()).hexdigest()
        value = int(digest[:12], 16) + int(digest[12:24], 16) + int(digest[24:], 16)
        ports.append(str(value % (end - start) + start))
    return ports


def port_spec(role: RoleSpec, config: ClusterConfig) -> str:
    """The ``rest-server/port-scheduling-spec`` annotation of a role's pods."""
    ports = {label: {"count": count} for label, count in role.ports.items()}
    spec = {
        "schedulePortStart": config.schedule_port_start,
        "schedulePortEnd": config.schedule_port_end,
        "ports": ports,
    }
    return json.dumps(spec, separators=(",", ":"))


def task_ports(role: RoleSpec, pod_uid: str, config: ClusterConfig) -> dict[str, list[str]]:
    start, end = config.schedule_port_start, config.schedule_port_end
    return {label: hashed_ports(pod_uid, label, count, start, end) for label, count in role.ports.items()}


def fc_env(fw: Framework, task: Task) -> dict[str, str]:
    attempt = fw.attempt
    assert attempt is not None
    pod = task.attempt
    return {
        "FC_FRAMEWORK_NAMESPACE": "default",
        "FC_FRAMEWORK_NAME": fw.debug_id,
        "FC_TASKROLE_NAME": task.role,
        "FC_TASK_INDEX": str(task.index),
        "FC_CONFIGMAP_NAME": f"{fw.debug_id}-attempt",
        "FC_POD_NAME": pod.pod_name or "",
        "FC_FRAMEWORK_UID": fw.uid,
        "FC_FRAMEWORK_ATTEMPT_ID": str(attempt.id),
        "FC_FRAMEWORK_ATTEMPT_INSTANCE_UID": attempt.instance_uid or "",
        "FC_CONFIGMAP_UID": (attempt.instance_uid or "").split("_", 1)[-1],
        "FC_TASK_UID": task.instance_uid,
        "FC_TASK_ATTEMPT_ID": str(pod.id),
        "FC_TASK_ATTEMPT_INSTANCE_UID": pod.instance_uid or "",
        "FC_POD_UID": pod.pod_uid or "",
    }


def runtime_env(fw: Framework, current: Task, config: ClusterConfig) -> dict[str, str]:
    attempt = fw.attempt
    assert attempt is not None
    env: dict[str, str] = {}
    instances = []
    for role in fw.roles:
        hosts = []
        for task in attempt.tasks.get(role.fc_name, []):
            pod_uid = task.attempt.pod_uid or ""
            ports = task_ports(role, pod_uid, config)
            instances.append(f"{role.fc_name}:{task.index}")
            for label, numbers in ports.items():
                env[f"PAI_PORT_LIST_{role.fc_name}_{task.index}_{label}"] = ",".join(numbers)
                env[f"PAI_{role.fc_name}_{task.index}_{label}_PORT"] = ",".join(numbers)
            ip = task.attempt.pod_host_ip
            if ip:
                env[f"PAI_HOST_IP_{role.fc_name}_{task.index}"] = ip
                hosts.append(f"{ip}:{ports['http'][0]}")
            if task is current:
                env.update(_current_container(ip or "", ports))
        env[f"PAI_TASK_ROLE_{role.fc_name}_HOST_LIST"] = ",".join(hosts)
    env["PAI_TASK_ROLE_INSTANCES"] = ",".join(instances)
    return env


def _current_container(ip: str, ports: dict[str, list[str]]) -> dict[str, str]:
    env = {
        "PAI_CURRENT_CONTAINER_IP": ip,
        "PAI_CURRENT_CONTAINER_PORT": ports["http"][0],
        "PAI_CONTAINER_HOST_IP": ip,
        "PAI_CONTAINER_HOST_PORT": ports["http"][0],
        "PAI_CONTAINER_SSH_PORT": ports["ssh"][0],
    }
    listing = ""
    for label, numbers in ports.items():
        env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = ",".join(numbers)
        listing += f"{label}:{','.join(numbers)};"
    env["PAI_CONTAINER_HOST_PORT_LIST"] = listing
    return env


def task_env(fw: Framework, task: Task, config: ClusterConfig) -> dict[str, str]:
    """Everything a task's container gets, in the order later sources override earlier ones."""
    role = fw.role(task.role)
    env = framework_env(fw)
    env["PAI_CURRENT_TASK_ROLE_NAME"] = role.name
    env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] = str(task.index)
    env["PAI_TASK_INDEX"] = str(task.index)
    if role.gpu == 0:
        env["NVIDIA_VISIBLE_DEVICES"] = "none"
    env.update(fc_env(fw, task))
    env.update(runtime_env(fw, task, config))
    return env


__all__ = ["framework_env", "hashed_ports", "port_spec", "runtime_env", "task_env", "task_ports"]
