"""What the ``frameworkcontroller/frameworkbarrier`` image runs, for the emulated kubelet (stdlib only).

As ``pkg/barrier/barrier.go`` plus the image's ``start.sh``: poll the pod's Framework until every task has
a pod IP, then write ``framework.json`` and ``injector.sh`` (``FB_<ROLE>_IPS``, ``FB_<ROLE>_ADDRESSES``) to
``/mnt/frameworkbarrier`` and exit 0; exit 210 when the Framework is gone, 201 on timeout. It reaches the
emulated API server through ``KUBE_APISERVER_ADDRESS`` (and the emulator's token).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

OUTPUT = "/mnt/frameworkbarrier"


def fetch(address: str, token: str, namespace: str, name: str) -> dict[str, Any] | None:
    url = f"{address}/apis/frameworkcontroller.microsoft.com/v1/namespaces/{namespace}/frameworks/{name}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def roles(framework: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    numbers = {r["name"]: r.get("taskNumber", 0) for r in framework["spec"].get("taskRoles") or []}
    status = framework.get("status") or {}
    found = []
    for role in (status.get("attemptStatus") or {}).get("taskRoleStatuses") or []:
        if role["name"] in numbers:
            found.append((role["name"], role["taskStatuses"][: numbers[role["name"]]]))
    return found


def passed(framework: dict[str, Any]) -> bool:
    total = sum(r.get("taskNumber", 0) for r in framework["spec"].get("taskRoles") or [])
    ready = sum(
        1
        for _, tasks in roles(framework)
        for t in tasks
        if not t.get("deletionPending") and t["attemptStatus"].get("podIP")
    )
    return ready >= total


def injector(framework: dict[str, Any]) -> str:
    lines = ["#!/bin/bash", ""]
    if framework.get("status") is None:
        return "\n".join(lines)
    lines += ["echo ./injector.sh: Start to inject environment variables", ""]
    for name, tasks in roles(framework):
        variable = f"FB_{name.upper()}_IPS"
        lines += [
            f"export {variable}=" + ",".join(t["attemptStatus"]["podIP"] for t in tasks),
            f"echo {variable}=${{{variable}}}",
        ]
    lines.append("")
    for name, tasks in roles(framework):
        variable, port = f"FB_{name.upper()}_ADDRESSES", f"FB_{name.upper()}_PORT"
        lines += [
            f"export {variable}=" + ",".join(f"{t['attemptStatus']['podIP']}:${{{port}}}" for t in tasks),
            f"echo {variable}=${{{variable}}}",
        ]
    lines += ["", "echo ./injector.sh: Succeeded to inject environment variables", ""]
    return "\n".join(lines)


def main() -> int:
    address = os.environ["KUBE_APISERVER_ADDRESS"]
    token = os.environ.get("KUBE_APISERVER_TOKEN", "")
    namespace, name = os.environ["FC_FRAMEWORK_NAMESPACE"], os.environ["FC_FRAMEWORK_NAME"]
    interval = float(os.environ.get("BARRIER_CHECK_INTERVAL_SEC", "10"))
    deadline = time.monotonic() + float(os.environ.get("BARRIER_CHECK_TIMEOUT_SEC", "600"))
    while True:
        framework = fetch(address, token, namespace, name)
        if framework is None:
            print("BarrierPermanentFailed: Framework not found", file=sys.stderr)
            return 210
        if passed(framework):
            break
        if time.monotonic() > deadline:
            print(
                "BarrierTransientConflictFailed: Timeout to wait all Tasks are ready with not nil PodIP.",
                file=sys.stderr,
            )
            return 201
        time.sleep(interval)
    os.makedirs(OUTPUT, exist_ok=True)
    with open(os.path.join(OUTPUT, "framework.json"), "w") as handle:
        json.dump(framework, handle)
    with open(os.path.join(OUTPUT, "injector.sh"), "w") as handle:
        handle.write(injector(framework))
    os.chmod(os.path.join(OUTPUT, "injector.sh"), 0o755)
    print(f"Succeeded to copy current Framework helper files into {OUTPUT}:")
    return 0


if __name__ == "__main__":
    sys.exit(main())
