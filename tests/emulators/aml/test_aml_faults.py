"""Rejections and fault knobs: validation (400 UserError), authentication (401), throttling and 5xx, eventual
consistency, image-pull failure, stuck queues, lost nodes, and the out-of-process control API and CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.ai.ml import command
from azure.ai.ml.entities import Environment
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError

from tests.emulators.aml import AmlEmulator, ManualClock, Timing

from .conftest import wait_for

IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
REPO_ROOT = Path(__file__).resolve().parents[3]


def submit(ml_client: Any, shell: str = "true", compute: str = "cpu-cluster", image: str = IMAGE) -> Any:
    return ml_client.jobs.create_or_update(
        command(command=shell, environment=Environment(image=image), compute=compute)
    )


def arm_token(emulator: AmlEmulator) -> str:
    return str(emulator.credential().get_token(f"{emulator.url}/.default").token)


def put_job(
    emulator: AmlEmulator, name: str, properties: dict[str, Any], token: str | None = None
) -> requests.Response:
    return requests.put(
        f"{emulator.url}{emulator.config.arm_id}/jobs/{name}?api-version=2025-01-01-preview",
        json={"properties": properties},
        headers={"Authorization": f"Bearer {token or arm_token(emulator)}"},
        timeout=10,
    )


def valid_properties(emulator: AmlEmulator, ml_client: Any) -> dict[str, Any]:
    """The body the SDK sent for a good job, to derive known-bad variants from."""
    submit(ml_client)
    return dict(emulator.requests()[-1].json()["properties"])


def test_an_unknown_compute_is_a_user_error(emulator: AmlEmulator, ml_client: Any) -> None:
    with pytest.raises(HttpResponseError) as raised:
        submit(ml_client, compute="no-such-cluster")
    assert raised.value.status_code == 400
    assert raised.value.error is not None and raised.value.error.code == "UserError"
    assert "no-such-cluster" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "target"),
    [
        ({"command": ""}, "command"),
        ({"command": None}, "command"),
        ({"jobType": "Nonsense"}, "jobType"),
        ({"environmentId": None}, "environmentId"),
        ({"inputs": {"lr": {"value": "1"}}}, "inputs.lr"),
    ],
)
def test_known_bad_bodies_are_rejected_with_400(
    emulator: AmlEmulator, ml_client: Any, change: dict[str, Any], target: str
) -> None:
    good = valid_properties(emulator, ml_client)
    assert put_job(emulator, "variant_ok", good).status_code == 201
    bad = {key: value for key, value in {**good, **change}.items() if value is not None}
    response = put_job(emulator, "variant_bad", bad)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "UserError" and error["target"] == target


def test_a_body_that_is_not_json_is_rejected(emulator: AmlEmulator) -> None:
    response = requests.put(
        f"{emulator.url}{emulator.config.arm_id}/jobs/x?api-version=2025-01-01-preview",
        data=b"{not json",
        headers={"Authorization": f"Bearer {arm_token(emulator)}"},
        timeout=10,
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "UserError"


def test_requests_without_a_valid_token_get_arms_401(emulator: AmlEmulator) -> None:
    url = f"{emulator.url}{emulator.config.arm_id}?api-version=2024-10-01-preview"
    missing = requests.get(url, timeout=10)
    forged = requests.get(url, headers={"Authorization": "Bearer e30.e30.c2ln"}, timeout=10)
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "AuthenticationFailed")
    assert (forged.status_code, forged.json()["error"]["code"]) == (401, "InvalidAuthenticationToken")
    assert 'error="invalid_token"' in forged.headers["WWW-Authenticate"]


def test_a_revoked_token_gives_client_authentication_error(emulator: AmlEmulator, ml_client: Any) -> None:
    job = submit(ml_client)
    emulator.revoke_tokens()
    with pytest.raises(ClientAuthenticationError):
        ml_client.jobs.get(job.name)
    assert emulator.requests()[-1].status == 401
    assert emulator.ml_client().jobs.get(job.name).name == job.name  # a fresh credential gets a fresh token


def test_a_token_expires_on_the_emulators_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    with AmlEmulator(tmp_path / "aml", clock=clock, token_lifetime=600) as emulator:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(emulator.ca_bundle))
        token = arm_token(emulator)
        url = f"{emulator.url}{emulator.config.arm_id}?api-version=2024-10-01-preview"
        headers = {"Authorization": f"Bearer {token}"}
        assert (
            requests.get(url, headers=headers, verify=str(emulator.ca_bundle), timeout=10).status_code == 200
        )
        emulator.advance_clock(601)
        expired = requests.get(url, headers=headers, verify=str(emulator.ca_bundle), timeout=10)
        assert expired.status_code == 401 and expired.json()["error"]["code"] == "ExpiredAuthenticationToken"


def test_the_manual_clock_holds_jobs_in_their_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    with AmlEmulator(tmp_path / "aml", clock=clock, timing=Timing(state_delay=5)) as emulator:
        for key, value in emulator.client_env().items():
            monkeypatch.setenv(key, value)
        ml_client = emulator.ml_client()
        job = submit(ml_client)
        for _ in range(3):
            assert ml_client.jobs.get(job.name).status == "NotStarted"
        emulator.advance_clock(5)
        assert ml_client.jobs.get(job.name).status == "Starting"


def test_throttling_is_retried_after_retry_after(emulator: AmlEmulator, ml_client: Any) -> None:
    job = submit(ml_client)
    emulator.faults.add(429, times=1, method="GET", path=r"/jobs/", retry_after=0)
    assert ml_client.jobs.get(job.name).name == job.name
    statuses = [e.status for e in emulator.requests() if e.method == "GET" and "/jobs/" in e.path]
    assert statuses == [429, 200]


def test_transient_5xx_are_retried_and_persistent_ones_surface(emulator: AmlEmulator, ml_client: Any) -> None:
    job = submit(ml_client)
    emulator.faults.add(503, times=1, method="GET", path=r"/jobs/")
    assert ml_client.jobs.get(job.name).name == job.name
    emulator.faults.add(500, times=1, method="GET", path=r"/jobs/")
    impatient = emulator.ml_client(retry_total=0)  # a client that does not retry sees the 500 itself
    with pytest.raises(HttpResponseError) as raised:
        impatient.jobs.get(job.name)
    assert raised.value.status_code == 500 and raised.value.error.code == "InternalServerError"


def test_a_new_job_may_be_invisible_for_a_moment(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(notFoundAfterCreate=1)
    job = submit(ml_client)
    with pytest.raises(ResourceNotFoundError):
        ml_client.jobs.get(job.name)
    assert ml_client.jobs.get(job.name).name == job.name


def test_an_image_that_cannot_be_pulled_fails_in_preparing(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(failImages=["registry.invalid/nope:1"])
    job = submit(ml_client, image="registry.invalid/nope:1")
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Failed")
    history = [s for s, _ in emulator.job(job.name).history]
    assert "Preparing" in history and "Running" not in history
    assert "registry.invalid/nope:1" in emulator.job(job.name).error["error"]["message"]


def test_a_held_queue_and_a_lost_node(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(holdStates=["Queued"])
    job = submit(ml_client, "sleep 300")
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Queued")
    assert ml_client.jobs.get(job.name).status == "Queued"  # no quota: it stays
    emulator.configure(holdStates=[])
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Running")
    emulator.force_status(job.name, "NotResponding")
    assert ml_client.jobs.get(job.name).status == "NotResponding"
    assert emulator.job(job.name).container.poll() is not None  # the node's process is gone


def test_the_control_api_steers_an_emulator_from_outside(emulator: AmlEmulator, ml_client: Any) -> None:
    control = f"{emulator.url}/_emu"
    verify = str(emulator.ca_bundle)
    info = requests.get(f"{control}/info", verify=verify, timeout=10).json()
    assert info["workspaceName"] == emulator.config.workspace_name and info["caBundle"] == verify
    job = submit(ml_client)
    response = requests.post(
        f"{control}/faults", json={"status": 503, "times": 1, "path": "/jobs/"}, verify=verify, timeout=10
    )
    assert response.status_code == 201
    ml_client.jobs.get(job.name)
    log = requests.get(f"{control}/requests", verify=verify, timeout=10).json()
    assert [e["status"] for e in log if e["method"] == "GET" and "/jobs/" in e["path"]] == [503, 200]
    assert all(e["apiVersion"] for e in log if e["path"].startswith("/subscriptions"))
    jobs = requests.get(f"{control}/jobs/{job.name}", verify=verify, timeout=10).json()
    assert jobs["history"][0] == "NotStarted"


def test_the_cli_prints_what_a_config_needs_and_serves(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.emulators.aml",
            "--port",
            "0",
            "--json",
            "--root",
            str(tmp_path / "cli"),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert process.stdout is not None
        info = json.loads(process.stdout.readline())
        for key in (
            "subscriptionId",
            "resourceGroup",
            "workspaceName",
            "computes",
            "caBundle",
            "cloudMetadata",
            "env",
        ):
            assert info[key]
        served = requests.get(f"{info['url']}/_emu/info", verify=info["caBundle"], timeout=10).json()
        assert served["clientId"] == info["clientId"]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
