"""``GET pods/{name}/log``: a container's output, the previous instance's, tail and byte limits, follow.

Errors are the kubelet's: a pod with several containers needs ``container``; a container that never
started is "waiting to start"; ``previous`` needs an earlier instance. Logs live as long as the pod.
``timestamps`` and ``sinceSeconds`` need per-line times the emulator does not keep, so they are refused
(400) rather than answered wrongly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import errors as err
from .containers import ContainerRun


def choose(pod: dict[str, Any], runs: dict[str, ContainerRun], container: str | None) -> ContainerRun | None:
    """The container the request names, or the pod's only one; raises the apiserver's 400s."""
    name = pod["metadata"]["name"]
    apps = [c["name"] for c in pod["spec"].get("containers") or []]
    inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
    if container is None:
        annotated = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
        if annotated in apps:
            container = annotated
        elif len(apps) == 1:
            container = apps[0]
        else:
            message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(apps)}]"
            if inits:
                message += f" or one of the init containers: [{' '.join(inits)}]"
            raise err.bad_request(message)
    if container not in apps and container not in inits:
        raise err.bad_request(f"container {container} is not valid for pod {name}")
    return runs.get(str(container))


def instance(pod: dict[str, Any], run: ContainerRun | None, container: str, previous: bool) -> Path:
    name = pod["metadata"]["name"]
    started = run.instances if run is not None else []
    if previous:
        if len(started) < 2:
            raise err.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        return started[-2]
    if not started:
        reason = "ContainerCreating"
        if run is not None and "waiting" in run.state:
            reason = run.state["waiting"].get("reason", reason)
        raise err.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return started[-1]


def check_options(timestamps: bool, since_seconds: int | None) -> None:
    if timestamps or since_seconds is not None:
        raise err.bad_request(
            "the emulator keeps no per-line log times: timestamps and sinceSeconds are not supported"
        )


def cut(data: bytes, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    if tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[-tail_lines:]) if tail_lines > 0 else b""
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data


def follow(path: Path, first: bytes, alive: Callable[[], bool], poll: float = 0.05) -> Iterator[bytes]:
    """What is there (already cut), then what the process appends until it ends."""
    yield first
    position = path.stat().st_size if path.exists() else 0
    while True:
        running = alive()
        with open(path, "rb") as handle:
            handle.seek(position)
            chunk = handle.read()
        position += len(chunk)
        if chunk:
            yield chunk
        if not running:
            return
        time.sleep(poll)
