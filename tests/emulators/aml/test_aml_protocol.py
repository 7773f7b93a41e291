"""The conversation azure-ai-ml 1.35.2 holds with the emulator (cluster-platforms.md §6.2), recorded and compared."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.ai.ml import command
from azure.ai.ml.entities import Environment
from azure.ai.ml.exceptions import AssetException
from azure.core.exceptions import ResourceNotFoundError, ServiceRequestError

from tests.emulators.aml import AmlEmulator

from .conftest import wait_for

IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"


def shape(emulator: AmlEmulator, entry: Any) -> str:
    """A request as ``METHOD path`` with the workspace prefix and generated names folded into placeholders."""
    path = entry.path.replace(emulator.config.arm_id, "{ws}")
    path = re.sub(r"/codes/[0-9a-f-]{36}/", "/codes/{uuid}/", path)
    path = re.sub(r"/versions/[0-9a-f]{64}$", "/versions/{hash}", path)
    path = re.sub(r"LocalUpload/[0-9a-f]{32}/", "LocalUpload/{id}/", path)
    path = re.sub(r"/jobs/[^/]+", "/jobs/{name}", path)
    path = re.sub(r"^/[0-9a-f-]{36}/", "/{tenant}/", path)
    comp = f"?comp={entry.query['comp']}" if "comp" in entry.query else ""
    return f"{entry.method} {path}{comp}"


def submit(ml_client: Any, code_dir: Path | None, shell: str, **kwargs: Any) -> Any:
    job = command(
        command=shell,
        code=str(code_dir) if code_dir else None,
        environment=Environment(image=IMAGE),
        compute="cpu-cluster",
        **kwargs,
    )
    return ml_client.jobs.create_or_update(job)


def test_submit_uploads_code_registers_environment_and_puts_the_job(
    emulator: AmlEmulator, ml_client: Any, code_dir: Path
) -> None:
    created = submit(ml_client, code_dir, "python train.py", experiment_name="golden")
    assert created.status == "NotStarted"
    conversation = [shape(emulator, e) for e in emulator.requests()]
    blob = f"/{emulator.config.storage_account}/{emulator.config.blobstore_container}/LocalUpload/{{id}}/src"
    assert conversation[:4] == [
        "GET /{tenant}/v2.0/.well-known/openid-configuration",
        "POST /{tenant}/oauth2/v2.0/token",
        "GET {ws}/codes/{uuid}/versions",
        "POST {ws}/codes/{uuid}/versions/1/startPendingUpload",
    ]
    # the directory upload checks its indicator file (the first), puts every file (in threads), then marks the
    # indicator file's metadata as the confirmation that the whole snapshot is there
    assert conversation[4] == f"HEAD {blob}/data/table.csv"
    assert sorted(conversation[5:7]) == [f"PUT {blob}/data/table.csv", f"PUT {blob}/train.py"]
    assert conversation[7] == f"PUT {blob}/data/table.csv?comp=metadata"
    assert conversation[8:] == [
        "PUT {ws}/codes/{uuid}/versions/1",
        "PUT {ws}/environments/CliV2AnonymousEnvironment/versions/{hash}",
        "PUT {ws}/jobs/{name}",
    ]
    api_versions = {
        shape(emulator, e): e.api_version for e in emulator.requests() if e.path.startswith("/subscriptions")
    }
    assert api_versions["GET {ws}/codes/{uuid}/versions"] == "2023-04-01"
    assert (
        api_versions["PUT {ws}/environments/CliV2AnonymousEnvironment/versions/{hash}"]
        == "2023-04-01-preview"
    )
    assert api_versions["PUT {ws}/jobs/{name}"] == "2025-01-01-preview"
    body = emulator.requests()[-1].json()["properties"]
    assert body["jobType"] == "Command" and body["computeId"].endswith("/computes/cpu-cluster")
    assert body["codeId"].startswith(emulator.config.arm_id + "/codes/")
    assert all(
        e.headers.get("Authorization", "").startswith("Bearer ")
        for e in emulator.requests()
        if e.path.startswith("/subscriptions")
    )


def test_the_same_snapshot_is_not_uploaded_twice(
    emulator: AmlEmulator, ml_client: Any, code_dir: Path
) -> None:
    submit(ml_client, code_dir, "python train.py")
    before = len(emulator.requests())
    submit(ml_client, code_dir, "python train.py")
    second = [shape(emulator, e) for e in emulator.requests()[before:]]
    assert not any(s.startswith(("PUT /trialfleetwsstore", "POST {ws}/codes")) for s in second)
    assert (
        "GET {ws}/codes/{uuid}/versions/1" in second
    )  # the hash lookup found it; the SDK reads that version


def test_cancel_is_a_long_running_operation(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(retryAfter=1)
    job = submit(ml_client, None, "sleep 60")
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Running")
    response = requests.post(
        f"{emulator.url}{emulator.config.arm_id}/jobs/{job.name}/cancel?api-version=2023-04-01-preview",
        headers={
            "Authorization": "Bearer " + emulator.credential().get_token(f"{emulator.url}/.default").token
        },
        timeout=10,
    )
    assert response.status_code == 202
    assert response.headers["Retry-After"] == "1"
    location = response.headers["Location"]
    assert "/mfeOperationResults/jc:" in location
    emulator.configure(retryAfter=0)
    ml_client.jobs.begin_cancel(job.name, polling_interval=0.05).result()
    assert ml_client.jobs.get(job.name).status == "Canceled"
    polls = [e.status for e in emulator.requests() if "mfeOperationResults" in e.path]
    assert polls[-1] == 200 and set(polls[:-1]) <= {202}
    assert [s for s, _ in emulator.job(job.name).history][-2:] == ["CancelRequested", "Canceled"]


def test_delete_is_a_long_running_operation_and_the_job_is_gone(
    emulator: AmlEmulator, ml_client: Any
) -> None:
    job = submit(ml_client, None, "true")
    ml_client.jobs.begin_delete(job.name, polling_interval=0.05).result()
    with pytest.raises(ResourceNotFoundError):
        ml_client.jobs.get(job.name)
    statuses = [e.status for e in emulator.requests() if e.method == "DELETE"]
    assert statuses == [202]


def test_get_of_an_unknown_job_is_404(emulator: AmlEmulator, ml_client: Any) -> None:
    with pytest.raises(ResourceNotFoundError):
        ml_client.jobs.get("no_such_job")
    assert emulator.requests()[-1].status == 404


def test_list_shows_submitted_jobs(emulator: AmlEmulator, ml_client: Any) -> None:
    names = {submit(ml_client, None, "true").name for _ in range(2)}
    assert names <= {job.name for job in ml_client.jobs.list()}


def test_stream_reads_logs_through_the_datastore_and_storage_host_names(
    emulator: AmlEmulator, ml_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    job = submit(ml_client, None, "echo to-stdout; echo to-stderr >&2")
    ml_client.jobs.stream(job.name)
    printed = capsys.readouterr().out
    assert "to-stdout" in printed and "to-stderr" in printed and "Execution Summary" in printed
    hosts = {e.host for e in emulator.requests()}
    assert f"{emulator.config.storage_account}.blob.{emulator.cloud_metadata['storage_endpoint']}" in hosts
    shapes = [shape(emulator, e) for e in emulator.requests()]
    assert "GET {ws}/datastores/workspaceartifactstore" in shapes
    assert "POST {ws}/datastores/workspaceartifactstore/listSecrets" in shapes
    assert any(s.endswith(f"/runs/{job.name}/details") for s in (e.path for e in emulator.requests()))


def test_the_sdk_refuses_bearer_tokens_over_plain_http(emulator: AmlEmulator, code_dir: Path) -> None:
    """The reason the emulator speaks TLS: the code-upload client will not send a token to an http:// ARM."""
    from azure.ai.ml import MLClient

    plain = {**emulator.cloud_metadata, "resource_manager": emulator.url.replace("https://", "http://") + "/"}
    client = MLClient(
        emulator.credential(),
        emulator.config.subscription_id,
        emulator.config.resource_group,
        emulator.config.workspace_name,
        cloud=emulator.cloud_name + "-http",
        cloud_metadata=plain,
        retry_total=0,
    )
    with pytest.raises(AssetException, match="non-TLS") as raised:
        submit(client, code_dir, "python train.py")
    assert isinstance(raised.value.__cause__ or raised.value.__context__, ServiceRequestError)
    assert not any("/codes/" in e.path for e in emulator.requests())  # refused before anything was sent
