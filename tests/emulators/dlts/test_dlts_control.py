"""The request log (NNI's conversation recorded request by request), the ``/_emu`` control API and the CLI."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator, ManualClock
from tests.emulators.dlts.testing import nni_job_body, poll

REPO = Path(__file__).resolve().parents[3]


def test_nni_conversation_is_recorded(dlts: DltsEmulator, client: httpx.Client) -> None:
    """NNI's requests in order: the VC (for gpuType), the submit, status polls, the kill."""
    vc = client.get(f"api/teams/{dlts.team}/clusters/{dlts.cluster}")
    body = nni_job_body(dlts, "sleep 300", gpus=1)
    job_id = client.post(f"api/clusters/{dlts.cluster}/jobs", json=body).json()["jobId"]
    poll(client, dlts, job_id, "running")
    client.put(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status", json={"status": "killing"})
    log = dlts.requests
    calls = [(e["method"], e["path"], e["status"]) for e in log]
    assert calls[0] == ("GET", f"/api/teams/{dlts.team}/clusters/{dlts.cluster}", 200)
    assert calls[1] == ("POST", f"/api/clusters/{dlts.cluster}/jobs", 200)
    assert set(calls[2:-1]) == {("GET", f"/api/v2/clusters/{dlts.cluster}/jobs/{job_id}", 200)}
    assert calls[-1] == ("PUT", f"/api/clusters/{dlts.cluster}/jobs/{job_id}/status", 200)
    assert all(e["query"] == {"email": [dlts.email], "password": [dlts.password]} for e in log)
    assert log[0]["response"] == vc.text
    assert log[1]["json"] == body and log[1]["headers"]["content-type"] == "application/json"
    assert log[-1]["json"] == {"status": "killing"}
    assert log[-1]["response"] == '{"result":"Success, the job is scheduled to be terminated."}\n'


def test_control_api(dlts: DltsEmulator, client: httpx.Client) -> None:
    control = httpx.Client(base_url=f"{dlts.url}_emu/")
    assert control.get("config").json() == dlts.describe()
    assert control.post("faults/http", json={"status": 500, "count": 1, "path": "/jobs$"}).status_code == 200
    assert control.post("faults/submit-error", json={"message": "DB down"}).json()["submit"] == ["DB down"]
    url = f"api/clusters/{dlts.cluster}/jobs"
    assert client.post(url, json=nni_job_body(dlts, "true")).status_code == 500
    assert client.post(url, json=nni_job_body(dlts, "true")).json() == {"error": "Cannot create job!DB down"}
    control.post("hold", json={"state": "queued"})
    job_id = client.post(url, json=nni_job_body(dlts, "sleep 300")).json()["jobId"]
    poll(client, dlts, job_id, "queued")
    assert control.get("faults").json()["held"] == ["queued"]
    control.post("release", json={"state": "queued"})
    poll(client, dlts, job_id, "running")
    paused = control.post(f"jobs/{job_id}/pause").json()
    assert paused["status"] == "pausing"
    poll(client, dlts, job_id, "paused")
    assert control.get(f"jobs/{job_id}").json()["history"][-2:] == ["pausing", "paused"]
    assert [j["jobId"] for j in control.get("jobs").json()] == [job_id]
    assert control.post(f"jobs/{job_id}/lose").json() == {"lost": job_id}
    assert control.get(f"jobs/{job_id}").status_code == 404
    assert control.post("delays", json={"queued": 0.5}).json()["queued"] == 0.5
    assert control.post("clock/advance", json={"seconds": 1}).status_code == 400  # a system clock
    assert control.post("step").json() == {"stepped": True}
    assert not any(e["path"].startswith("/_emu") for e in control.get("requests").json())
    assert control.delete("requests").json() == {"cleared": True}
    assert dlts.requests == []
    control.close()


def test_manual_clock_through_the_control_api(tmp_path: Path) -> None:
    with DltsEmulator(tmp_path / "nfs", clock=ManualClock(start=1000.0)) as dlts:
        answer = httpx.post(f"{dlts.url}_emu/clock/advance", json={"seconds": 2.5})
        assert answer.json() == {"time": 1002.5}


def _read_banner(process: subprocess.Popen[bytes], timeout: float = 30) -> str:
    assert process.stdout is not None
    fd, output = process.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while b"\ncontrol API" not in output:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no banner; got {output!r}"
        if select.select([fd], [], [], remaining)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"the emulator exited: {output!r}"
            output += chunk
    return output.decode()


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.emulators.dlts",
            "--port",
            "0",
            "--storage",
            str(tmp_path / "nfs"),
            "--master-token",
            "cli-token",
            "--delay",
            "queued=0.01",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        yield process, _read_banner(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


def test_cli_prints_what_an_nni_config_needs(
    cli: tuple[subprocess.Popen[bytes], str], tmp_path: Path
) -> None:
    process, banner = cli
    dashboard = re.search(r"^  dashboard: (http://127\.0\.0\.1:\d+/)$", banner, re.M)
    password = re.search(r"^  password: ([0-9a-f]{32})$", banner, re.M)
    assert dashboard and password, banner
    assert "  cluster: emu-cluster\n" in banner and "  team: platform\n" in banner
    assert "masterToken: cli-token" in banner
    assert f"{(tmp_path / 'nfs').resolve()}/work/trialfleet" in banner
    params = {"email": "trialfleet@example.com", "password": password.group(1)}
    vc = httpx.get(f"{dashboard.group(1)}api/teams/platform/clusters/.default", params=params)
    assert vc.status_code == 200 and vc.json()["vcName"] == "platform"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
