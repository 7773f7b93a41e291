"""Limits and fault knobs: 409 forever, the submission rate limit, injected 5xx/429/401, slow states, a lost job,
404 right after create, the request log, the control API and the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.emulators.openpai import ClusterConfig, ManualClock, OpenPAIEmulator, Timing
from tests.emulators.openpai.conftest import FAST
from tests.emulators.openpai.testing import protocol, submit, wait_for, watch

REPO = Path(__file__).resolve().parents[3]


def test_a_job_name_can_never_be_used_again(client: httpx.Client) -> None:
    assert submit(client, protocol("once", ["true"])).status_code == 202
    watch(client, "alice~once")
    again = submit(client, protocol("once", ["true"]))
    assert again.status_code == 409
    assert again.json() == {"code": "ConflictJobError", "message": "Job alice~once already exists."}


def test_submissions_are_limited_per_user_and_hour(tmp_path: Path) -> None:
    clock = ManualClock()
    with OpenPAIEmulator(
        ClusterConfig(timing=Timing(delays=dict(FAST))), clock=clock, workdir=tmp_path / "c"
    ) as pai:
        client = httpx.Client(base_url=pai.api, headers=pai.auth_headers())
        first = submit(client, protocol("r1", ["true"]))
        assert first.headers["X-RateLimit-Limit"] == "60" and first.headers["X-RateLimit-Remaining"] == "59"
        pai.set_limits(submit_job_per_hour=2)
        assert submit(client, "not a protocol").status_code == 400  # counted: the limiter runs first
        limited = submit(client, protocol("r3", ["true"]))
        assert limited.status_code == 429
        assert limited.text == "Too many requests, please try again later."
        assert limited.headers["Retry-After"] == "3600" and limited.headers["content-type"].startswith(
            "text/html"
        )
        admin = httpx.Client(base_url=pai.api, headers=pai.auth_headers("admin"))
        assert submit(admin, protocol("r3", ["true"])).status_code == 202  # per user
        pai.advance(3600)
        assert submit(client, protocol("r3", ["true"])).status_code == 202


def test_listing_is_limited_per_user_and_minute(client: httpx.Client) -> None:
    assert client.get("/jobs").headers["X-RateLimit-Limit"] == "60"


def test_transient_errors_on_the_next_requests_of_a_route(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    pai.fail_next(2, status=503, method="GET", path=r"/jobs$")
    assert client.get("/info").status_code == 200  # another route is not affected
    for _ in range(2):
        failed = client.get("/jobs")
        assert failed.status_code == 503 and "503 Service Temporarily Unavailable" in failed.text
    assert client.get("/jobs").status_code == 200
    pai.fail_next(1, status=500)
    assert client.get("/jobs").json()["code"] == "UnknownError"
    pai.fail_next(1, status=429)
    assert client.get("/jobs").status_code == 429


def test_an_expired_token_answers_401(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    assert client.get("/jobs").status_code == 200
    assert pai.expire_token(user="alice") == 1
    response = client.get("/jobs")
    assert response.status_code == 401 and response.json()["message"] == "Your token is invalid."
    assert (
        httpx.get(pai.api + "/jobs", headers=pai.auth_headers("alice")).status_code == 200
    )  # a new one works


def test_slow_states_last_until_the_clock_passes_them(tmp_path: Path) -> None:
    clock = ManualClock()
    delays = {state: 10.0 for state in FAST}
    with OpenPAIEmulator(
        ClusterConfig(timing=Timing(delays=delays)), clock=clock, workdir=tmp_path / "c"
    ) as pai:
        client = httpx.Client(base_url=pai.api, headers=pai.auth_headers())
        submit(client, protocol("slow", ["true"]))
        for _ in range(3):
            pai.cluster.tick()
            assert client.get("/jobs/alice~slow").json()["jobStatus"]["subState"] == "AttemptCreationPending"
        pai.advance(10)
        assert client.get("/jobs/alice~slow").json()["jobStatus"]["subState"] == "AttemptCreationRequested"
        pai.set_delays(AttemptCreationRequested=0.0)
        pai.advance(0)
        assert client.get("/jobs/alice~slow").json()["jobStatus"]["subState"] == "AttemptPreparing"


def test_a_lost_job_vanishes(pai: OpenPAIEmulator, client: httpx.Client, tmp_path: Path) -> None:
    submit(
        client,
        protocol(
            "lost",
            ["echo $$ > /mnt/confignfs/pid", "sleep 300"],
            extras={"storages": [{"name": "confignfs"}]},
        ),
    )
    watch(client, "alice~lost", until=("RUNNING",))
    pid_file = tmp_path / "nfs" / "pid"
    pid = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()))
    pai.lose_job("alice~lost")
    response = client.get("/jobs/alice~lost")
    assert response.status_code == 404 and response.json() == {
        "code": "NoJobError",
        "message": "Job alice~lost is not found.",
    }
    wait_for(
        lambda: (
            not Path(f"/proc/{pid}").exists()
            or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
        )
    )
    assert submit(client, protocol("lost", ["true"])).status_code == 202


def test_a_new_job_can_be_missing_right_after_create(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    pai.hide_next_jobs(gets=2)
    assert submit(client, protocol("late", ["true"])).status_code == 202
    assert client.get("/jobs").json() == []
    for _ in range(2):
        assert client.get("/jobs/alice~late").status_code == 404
    assert client.get("/jobs/alice~late").status_code == 200
    assert [row["name"] for row in client.get("/jobs").json()] == ["late"]


def test_every_request_is_logged(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    submit(client, protocol("logged", ["true"]))
    client.get("/jobs", params={"username": "alice"})
    post, get = pai.requests[-2:]
    assert post["method"] == "POST" and post["path"] == "/rest-server/api/v2/jobs" and post["status"] == 202
    assert "name: logged" in post["body"] and post["headers"]["Content-Type"] == "text/yaml"
    assert post["headers"]["Authorization"] == f"Bearer {pai.token('alice')}"
    assert get["query"] == {"username": "alice"} and get["status"] == 200


def test_the_control_api(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    control = httpx.Client(base_url=pai.url + "/_emu")
    token = control.post("/tokens", json={"user": "admin"}).json()["token"]
    assert httpx.get(pai.api + "/jobs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    control.post("/faults", json={"status": 502, "count": 1, "path": "/info"})
    assert client.get("/info").status_code == 502
    control.post("/delays", json={"AttemptRunning": 0.02})
    assert control.get("/delays").json()["AttemptRunning"] == 0.02
    submit(client, protocol("ctl", ["true"]))
    watch(client, "alice~ctl")
    jobs = control.get("/jobs").json()
    assert (
        jobs[0]["name"] == "alice~ctl"
        and jobs[0]["subState"] == "Completed"
        and jobs[0]["tasks"][0]["exitCode"] == 0
    )
    log = control.get("/requests", params={"since": 0}).json()
    assert log["next"] == len(log["requests"]) and log["requests"][0]["path"] == "/rest-server/api/v2/jobs"
    assert control.post("/tokens/expire", json={"token": token}).json() == {"expired": 1}
    assert control.post("/clock/advance", json={"seconds": 1}).status_code == 409  # the system clock


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    storage = tmp_path / "shared"
    command = [
        sys.executable,
        "-m",
        "tests.emulators.openpai",
        "--port",
        "0",
        "--storage",
        str(storage),
        "--delay",
        "0.01",
    ]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    printed: dict[str, str] = {}
    try:
        assert process.stdout is not None
        for line in process.stdout:
            key, _, value = line.strip().partition(": ")
            printed[key] = value
            if line.startswith("control API"):
                break
        yield process, printed
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)


def test_the_command_line_prints_an_nni_config_and_serves(
    cli: tuple[subprocess.Popen[str], dict[str, str]], tmp_path: Path
) -> None:
    process, printed = cli
    assert printed["platform"] == "openpai" and printed["username"] == "alice"
    assert (
        printed["storageConfigName"] == "confignfs"
        and printed["containerStorageMountPoint"] == "/mnt/confignfs"
    )
    assert Path(printed["localStorageMountPoint"]) == (tmp_path / "shared").resolve()
    client = httpx.Client(
        base_url=printed["host"] + "/rest-server/api/v2",
        headers={"Authorization": f"Bearer {printed['token']}"},
    )
    submit(
        client,
        protocol(
            "fromcli",
            ["echo $PAI_JOB_NAME > /mnt/confignfs/out"],
            extras={"storages": [{"name": "confignfs"}]},
        ),
    )
    assert watch(client, "alice~fromcli")[1]["jobStatus"]["state"] == "SUCCEEDED"
    assert (tmp_path / "shared" / "out").read_text() == "alice~fromcli\n"
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
