"""Submitting a job: the dashboard's body check (400, ajv text), then ``SubmitJob``'s rules, whose refusals come
back with HTTP 200 and ``{"error": "Cannot create job!..."}``."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator
from tests.emulators.dlts.testing import job, nni_job_body, poll


def post(client: httpx.Client, dlts: DltsEmulator, body: Any, **kwargs: Any) -> httpx.Response:
    return client.post(f"api/clusters/{dlts.cluster}/jobs", json=body, **kwargs)


def test_nni_job_config_is_accepted_as_text_with_a_uuid4(dlts: DltsEmulator, client: httpx.Client) -> None:
    answer = post(client, dlts, nni_job_body(dlts, "sleep 60", gpus=1))
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"  # Koa forwards the RestAPI's text
    assert re.fullmatch(r'\{"jobId":"[0-9a-f-]{36}"\}\n', answer.text)
    job_id = answer.json()["jobId"]
    assert uuid.UUID(job_id).version == 4
    params = job(client, dlts, job_id)["jobParams"]
    alias = dlts.email.split("@")[0]
    assert params["userName"] == dlts.email and params["isParent"] == 1
    assert uuid.UUID(params["familyToken"]).version == 4
    assert params["preemptionAllowed"] is False  # "False" went through ToBool
    assert params["workPath"] == alias and params["dataPath"] == ""
    assert re.fullmatch(rf"{alias}/jobs/\d{{6}}/{job_id}", params["jobPath"])
    assert params["gpuType"] == "P40" and params["sku"] == "Standard_P40"


def test_the_dashboard_overrides_user_name_with_the_authenticated_email(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    answer = post(client, dlts, {**nni_job_body(dlts, "true"), "userName": "mallory@example.com"})
    assert job(client, dlts, answer.json()["jobId"])["userName"] == dlts.email


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, " should have required property 'team'"),
        ({"team": 7}, ".team should be string"),
        ({"team": None, "vcName": ""}, ".team should be string"),
        ([], " should be object"),
    ],
)
def test_body_schema_violations_are_400_with_ajv_messages(
    dlts: DltsEmulator, client: httpx.Client, body: Any, message: str
) -> None:
    answer = post(client, dlts, body)
    assert (answer.status_code, answer.text) == (400, message)


def test_team_is_taken_from_vc_name(dlts: DltsEmulator, client: httpx.Client) -> None:
    body = {k: v for k, v in nni_job_body(dlts, "true").items() if k != "team"}
    assert "jobId" in post(client, dlts, body).json()
    assert "jobId" in post(client, dlts, {**body, "team": None}).json()


def test_bodies_koa_bodyparser_refuses(dlts: DltsEmulator, client: httpx.Client) -> None:
    url = f"api/clusters/{dlts.cluster}/jobs"
    headers = {"content-type": "application/json"}
    answer = client.post(url, content=b'"a string"', headers=headers)
    assert (answer.status_code, answer.text) == (400, "invalid JSON, only supports object and array")
    answer = client.post(url, content=b'{"team": }', headers=headers)
    assert (answer.status_code, answer.text) == (400, "Unexpected token } in JSON at position 9")
    answer = client.post(url, content=b'{"team": "x"}', headers={"content-type": "text/plain"})
    assert (answer.status_code, answer.text) == (400, " should have required property 'team'")


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"vcName": None, "team": "platform"}, "ERROR: VC name cannot be empty"),
        ({"jobName": "  "}, "ERROR: Job name cannot be empty"),
        ({"jobtrainingtype": "PSDistJob"}, "ERROR: Invalid numpsworker value"),
        ({"jobtrainingtype": "PSDistJob", "numpsworker": "0"}, "ERROR: Invalid numpsworker value"),
        ({"jobPath": "a/../b"}, "ERROR: '..' cannot be used in job directory"),
        ({"jobPath": "/abs"}, "ERROR: job directory should not start with '/' or '\\' "),
        ({"workPath": "x\\.y"}, "ERROR: invalided work directory"),
        ({"workPath": "\\share"}, "ERROR: work directory should not start with '/' or '\\' "),
        ({"dataPath": "/imagenet"}, "ERROR: data directory should not start with '/' or '\\' "),
        ({"dataPath": "../other"}, "ERROR: '..' cannot be used in data directory"),
        ({"vcName": "not-my-team", "team": "not-my-team"}, "Access Denied!"),
        ({"jobType": None}, "Cannot schedule job. Cannot add job into database."),
        ({"jobId": "x" * 51}, "Cannot schedule job. Cannot add job into database."),
    ],
)
def test_submit_job_refusals_are_http_200_with_error(
    dlts: DltsEmulator, client: httpx.Client, changes: dict[str, Any], error: str
) -> None:
    body = nni_job_body(dlts, "true")
    body.update({k: v for k, v in changes.items() if v is not None})
    for key in [k for k, v in changes.items() if v is None]:
        del body[key]
    answer = post(client, dlts, body)
    assert answer.status_code == 200
    assert answer.json() == {"error": "Cannot create job!" + error}


@pytest.mark.parametrize(
    "changes",
    [
        {"jobName": 12},  # .strip() of a number
        {"resourcegpu": "two"},  # int("two")
        {"preemptionAllowed": "maybe"},  # ToBool raises
        {"userId": 1000},  # .strip() again
    ],
)
def test_inputs_the_restapi_crashes_on_are_500(
    dlts: DltsEmulator, client: httpx.Client, changes: dict[str, Any]
) -> None:
    answer = post(client, dlts, {**nni_job_body(dlts, "true"), **changes})
    assert (answer.status_code, answer.text) == (500, "Internal Server Error")


def test_a_client_chosen_job_id_makes_submit_idempotent(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = str(uuid.uuid4())
    body = {**nni_job_body(dlts, "sleep 30"), "jobId": job_id}
    assert post(client, dlts, body).json() == {"jobId": job_id}
    again = post(client, dlts, body)
    assert again.json() == {"error": "Cannot create job!Cannot schedule job. Cannot add job into database."}


def test_paths_are_put_under_the_alias_and_normalized(dlts: DltsEmulator, client: httpx.Client) -> None:
    alias = dlts.email.split("@")[0]
    body = {
        **nni_job_body(dlts, "true"),
        "jobPath": "exp/./t1/",
        "workPath": "code\\v2",
        "dataPath": "sets/x",
    }
    params = job(client, dlts, post(client, dlts, body).json()["jobId"])["jobParams"]
    assert params["jobPath"] == f"{alias}/exp/t1"
    assert params["workPath"] == f"{alias}/code/v2"
    assert params["dataPath"] == "sets/x"
    # startswith(alias) without a slash: a path of another user that merely starts with the alias is kept
    body = {**nni_job_body(dlts, "true"), "workPath": f"{alias}2/code"}
    assert (
        job(client, dlts, post(client, dlts, body).json()["jobId"])["jobParams"]["workPath"]
        == f"{alias}2/code"
    )


def test_string_gpus_and_flags_are_normalized(dlts: DltsEmulator, client: httpx.Client) -> None:
    body = {**nni_job_body(dlts, "true"), "resourcegpu": " ", "preemptionAllowed": "1"}
    params = job(client, dlts, post(client, dlts, body).json()["jobId"])["jobParams"]
    assert params["resourcegpu"] == 0 and params["preemptionAllowed"] is True


def test_log_dir_without_job_id_collides_with_its_tensorboard_job(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    """SubmitJob gives the TensorBoard job and the job the same fresh uuid, so the job's INSERT fails."""
    answer = post(client, dlts, {**nni_job_body(dlts, "true"), "logDir": "/job/tb"})
    assert answer.json() == {"error": "Cannot create job!Cannot schedule job. Cannot add job into database."}
    job_id = str(uuid.uuid4())
    answer = post(client, dlts, {**nni_job_body(dlts, "true"), "logDir": "/job/tb", "jobId": job_id})
    assert answer.json() == {"jobId": job_id}
    listing = client.get(f"api/v2/clusters/{dlts.cluster}/teams/{dlts.team}/jobs").json()
    # the first submit left its TensorBoard job behind; the second added both
    assert sorted(j["jobType"] for j in listing) == ["training", "visualization", "visualization"]


def dlworkspace_test_job(dlts: DltsEmulator, job_type: str, cmd: str) -> dict[str, Any]:
    """``gen_default_job_description`` of DLWorkspace's ``src/ClusterManager/test/utils.py`` (uid a string)."""
    body: dict[str, Any] = {
        "userName": dlts.email,
        "userId": "20001",
        "jobType": "training",
        "gpuType": "P40",
        "vcName": dlts.team,
        "containerUserId": 0,
        "jobName": f"test_regular_job.{job_type}",
        "preemptionAllowed": False,
        "image": "indexserveregistry.azurecr.io/deepscale:1.0.post0",
        "cmd": cmd,
        "workPath": "./",
        "enableworkpath": True,
        "dataPath": "./",
        "enabledatapath": True,
        "jobPath": "",
        "enablejobpath": True,
        "env": [],
        "resourcegpu": 0,
        "memorylimit": "500M",
        "cpulimit": 1,
        "_allow_partial_node": True,
    }
    if job_type == "regular":
        body.update(jobtrainingtype="RegularJob", hostNetwork=False, isPrivileged=False)
    else:
        body.update(jobtrainingtype="PSDistJob", hostNetwork=True, isPrivileged=True, numps=1, numpsworker=1)
    return body


def test_dlworkspace_integration_test_jobs(dlts: DltsEmulator, client: httpx.Client) -> None:
    regular = post(client, dlts, dlworkspace_test_job(dlts, "regular", "echo wantThisInLog")).json()["jobId"]
    seen, detail = poll(client, dlts, regular)
    assert seen[-1] == "finished" and detail["jobParams"]["memorylimit"] == "500M"
    log = client.get(f"api/clusters/{dlts.cluster}/jobs/{regular}/log").json()["log"][regular]
    assert log.startswith("wantThisInLog\n")
    # SubmitJob accepts a PSDistJob; the emulator runs RegularJobs only and says so through the job's error
    distributed = post(client, dlts, dlworkspace_test_job(dlts, "distributed", "true")).json()["jobId"]
    assert poll(client, dlts, distributed)[0][-1] == "error"
    message = client.get(f"api/clusters/{dlts.cluster}/jobs/{distributed}/status").json()["message"]
    assert message == "Cannot submit job!emulator: PSDistJob jobs are not emulated, only RegularJob"
