"""Helpers for tests that drive the emulator with plain HTTP (DLTS has no Python client): NNI's job body and
a poll loop that records every status it reads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.emulators.dlts import DltsEmulator

TERMINAL = ("finished", "failed", "error", "killed")


def nni_job_body(
    dlts: DltsEmulator, cmd: str, *, gpus: int = 0, name: str = "nni_exp_abc_trial_x"
) -> dict[str, Any]:
    """The body NNI's ``DLTSJobConfig`` posted (field for field, in its order), with ``gpuType`` fetched."""
    return {
        "team": dlts.team,
        "userName": dlts.email,
        "vcName": dlts.team,
        "gpuType": "P40",
        "jobType": "training",
        "jobtrainingtype": "RegularJob",
        "ssh": False,
        "ipython": False,
        "tensorboard": False,
        "workPath": "",
        "enableworkpath": True,
        "dataPath": "",
        "enabledatapath": False,
        "jobPath": "",
        "enablejobpath": True,
        "mountpoints": [],
        "env": [{"name": "TMPDIR", "value": "$HOME/tmp"}],
        "hostNetwork": False,
        "useGPUTopology": False,
        "isPrivileged": False,
        "hostIPC": False,
        "preemptionAllowed": "False",
        "jobName": name,
        "resourcegpu": gpus,
        "image": "msranni/nni",
        "cmd": cmd,
        "interactivePorts": [],
    }


def submit(client: httpx.Client, dlts: DltsEmulator, cmd: str, **overrides: Any) -> str:
    body = {**nni_job_body(dlts, cmd), **overrides}
    response = client.post(f"api/clusters/{dlts.cluster}/jobs", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "jobId" in answer, answer
    return str(answer["jobId"])


def job(client: httpx.Client, dlts: DltsEmulator, job_id: str) -> dict[str, Any]:
    response = client.get(f"api/v2/clusters/{dlts.cluster}/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def poll(
    client: httpx.Client,
    dlts: DltsEmulator,
    job_id: str,
    until: str | tuple[str, ...] = TERMINAL,
    timeout: float = 30.0,
) -> tuple[list[str], dict[str, Any]]:
    """Read the job until its status is one of ``until``; returns the distinct statuses read, in order."""
    wanted = (until,) if isinstance(until, str) else until
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        detail = job(client, dlts, job_id)
        status = detail.get("jobStatus", "<none>")
        if not seen or seen[-1] != status:
            seen.append(status)
        if status in wanted:
            return seen, detail
        assert time.monotonic() < deadline, f"job {job_id} never reached {wanted}; statuses read: {seen}"
        time.sleep(0.01)


def set_status(client: httpx.Client, dlts: DltsEmulator, job_id: str, status: str) -> str:
    response = client.put(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status", json={"status": status})
    assert response.status_code == 200, response.text
    return str(response.json()["result"])


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_for(condition: Any, timeout: float = 30.0, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {message}"
        time.sleep(0.01)


__all__ = ["TERMINAL", "job", "nni_job_body", "poll", "process_alive", "set_status", "submit", "wait_for"]
