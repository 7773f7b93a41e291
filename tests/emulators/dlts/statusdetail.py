"""``jobStatusDetail``: what the job manager writes when a job stops (``job_launcher.py``, ``k8sUtils.py``)."""

from __future__ import annotations

import copy
from typing import Any

from tests.emulators.dlts.clock import iso_utc
from tests.emulators.dlts.launch import POD_IP


def with_finished_time(detail: Any, status: str, now: float, msg: str = "") -> Any:
    """``job_status_detail_with_finished_time``: every pod gets ``startedAt``/``finishedAt`` and a status line.

    A job that ends before a pod reported ``startedAt`` gets the finish time for both.
    """
    if detail is not None and not isinstance(detail, list):
        return detail
    items = copy.deepcopy(detail) if detail else [{}]
    finished_at = iso_utc(now)
    line = f"{status} at {finished_at}. {msg}"
    for item in items:
        item.setdefault("startedAt", finished_at)
        item.setdefault("finishedAt", finished_at)
        item["message"] = item["message"] + "\n" + line if "message" in item else line
    return items


def pod_detail(pod: Any, status: str, now: float) -> list[dict[str, Any]]:
    """``k8sUtils.GetJobStatus``'s detail of the job's pod when it is deleted (``get_pod_status``).

    Container times come from Kubernetes, in whole seconds; a pod still waiting reports ``ContainerCreating``.
    """
    if pod is None:
        if status != "scheduling":
            return []
        return [{"finishedAt": iso_utc(now), "hostIP": POD_IP, "message": "ContainerCreating"}]
    started = iso_utc(pod.started_at, whole_seconds=True)
    code = pod.container.poll()
    if code is None:
        item = {"message": f"started at: {started}", "startedAt": started, "finishedAt": iso_utc(now)}
    else:
        reason = "Completed" if code == 0 else "Error"
        item = {"message": reason, "startedAt": started, "finishedAt": iso_utc(now, whole_seconds=True)}
    item.update(podIP=POD_IP, hostIP=POD_IP)
    return [item]


__all__ = ["pod_detail", "with_finished_time"]
