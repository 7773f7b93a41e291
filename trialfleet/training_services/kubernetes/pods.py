"""The pod template every trial replica runs in, whatever operator makes its pods (pure; golden-file tested).

One container runs the entry point (``entrypoint.py`` on the storage) with the image's ``python3``: it finds
the replica's trial directory and runs the keeper there. The storage is mounted at its container path; the
trial's variables (NNI's, the spec's) are plain ``env`` values. The kubelet expands ``$(VAR)`` in ``command``,
``args`` and ``env`` values and turns ``$$`` into ``$``, so every ``$`` written here is doubled: values reach the
trial exactly as given. Resources are requests and equal limits (NNI's ``memory: <MB>Mi``, ``cpu``,
``nvidia.com/gpu``); a replica without GPUs sees none (``CUDA_VISIBLE_DEVICES=""``, as NNI set it).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trialfleet.training_services.batch.launch import shim_lines
from trialfleet.training_services.environment import gpu_variables
from trialfleet.training_services.kubernetes.storage import VOLUME_NAME

#: the container's replica index, from the label its operator puts on the pod (read through the downward API)
INDEX_VARIABLE = "TRIALFLEET_REPLICA_INDEX"
TERMINATION_GRACE = 30  # seconds: the keeper ends the trial's tree within its kill grace (5 s)


def escaped(text: str) -> str:
    """A value the kubelet gives back unchanged (no ``$(VAR)`` expansion)."""
    return text.replace("$", "$$")


class ContainerCommand(Protocol):
    """What a replica's container runs."""

    def argv(self, role: str, index_variable: str) -> list[str]: ...


@dataclass(frozen=True)
class Entrypoint:
    """Where the replica's container finds what it runs (container paths on the storage)."""

    python: str  # the image's interpreter
    script: str  # entrypoint.py
    trial_dir: str
    keeper: str
    shim_dir: str
    primary_role: str
    restartable: bool = False

    def argv(self, role: str, index_variable: str) -> list[str]:
        mode = "restartable" if self.restartable else "once"
        tail = [self.trial_dir, self.keeper, self.shim_dir, role, self.primary_role, index_variable, mode]
        return [self.python, "-I", "-S", self.script, *tail]


@dataclass(frozen=True)
class WorkerCommand:
    """A reuse-mode worker's container (:mod:`.workers`): the ``nni`` shim where the image's python3 has no real
    nni (its trials inherit it), then the worker itself."""

    shim_dir: str
    worker_argv: tuple[str, ...]

    def argv(self, role: str, index_variable: str) -> list[str]:
        script = "\n".join([*shim_lines(self.shim_dir), "exec " + shlex.join(self.worker_argv)])
        return ["/bin/sh", "-c", script]


@dataclass(frozen=True)
class Replica:
    """One role's containers: what they run and what they ask for."""

    role: str  # as the entry point names its directory: "worker", "master", a task role
    container: str  # the container name the operator wants ("tensorflow", "pytorch" …)
    image: str
    cpu: float | None
    memory_mb: int | None
    gpus: int | None
    memory: str | None = None  # a Kubernetes quantity instead of memory_mb (AdaptDL)
    pull_secrets: tuple[str, ...] = ()
    index_variable: str = INDEX_VARIABLE
    #: the pod labels that may hold the index (operators of different versions use different ones), each given
    #: to the container through the downward API; the entry point takes the first that is set
    index_labels: tuple[str, ...] = ()
    shell_prefix: str | None = None  # shell code run before the entry point (FrameworkController's barrier)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()


def quantity(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def resources(replica: Replica) -> dict[str, Any]:
    amounts: dict[str, str] = {}
    if replica.cpu is not None:
        amounts["cpu"] = quantity(replica.cpu)
    if replica.memory is not None:
        amounts["memory"] = replica.memory
    elif replica.memory_mb is not None:
        amounts["memory"] = f"{replica.memory_mb}Mi"
    if replica.gpus:
        amounts["nvidia.com/gpu"] = str(replica.gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def environment(replica: Replica, variables: Mapping[str, str]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    for name, label in zip(index_variables(replica), replica.index_labels, strict=False):
        path = f"metadata.labels['{label}']"
        env.append({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}})
    merged = {**variables, **replica.extra_env, **gpu_variables(replica.gpus or 0, None)}
    env += [{"name": name, "value": escaped(value)} for name, value in merged.items()]
    return env


def index_variables(replica: Replica) -> list[str]:
    """The variables that may hold the replica's index, in the order the entry point reads them."""
    if len(replica.index_labels) <= 1:
        return [replica.index_variable]
    return [replica.index_variable] + [
        f"{replica.index_variable}_{i}" for i in range(1, len(replica.index_labels))
    ]


def container(
    replica: Replica, entrypoint: ContainerCommand, variables: Mapping[str, str], mount_path: str
) -> dict[str, Any]:
    argv = entrypoint.argv(replica.role, ",".join(index_variables(replica)))
    if replica.shell_prefix is not None:
        argv = ["/bin/sh", "-c", f'{replica.shell_prefix} && exec "$@"', "sh", *argv]
    spec: dict[str, Any] = {
        "name": replica.container,
        "image": replica.image,
        "command": [escaped(part) for part in argv],
        "env": environment(replica, variables),
        "volumeMounts": [{"name": VOLUME_NAME, "mountPath": mount_path}],
        # the log's tail becomes the termination message of a failed replica, which operators report
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if replica.ports:
        spec["ports"] = [{"containerPort": port} for port in replica.ports]
    limits = resources(replica)
    if limits:
        spec["resources"] = limits
    return spec


def pod_template(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    containers: Sequence[dict[str, Any]],
    volume: Mapping[str, Any],
    replica: Replica,
    *,
    service_account: str | None = None,
    init_containers: Sequence[dict[str, Any]] = (),
    extra_volumes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE,
        "containers": list(containers),
        "volumes": [{"name": VOLUME_NAME, **volume}, *extra_volumes],
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if service_account:
        spec["serviceAccountName"] = service_account
    if replica.pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in replica.pull_secrets]
    return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": spec}
