"""Authentication (``middlewares/user.js``): email + hex md5(email:masterToken), and the order of the checks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator, Team, User
from tests.emulators.dlts.testing import nni_job_body


def test_password_is_hex_md5_of_email_and_master_token(dlts: DltsEmulator) -> None:
    expected = hashlib.md5(f"{dlts.email}:{dlts.master_token}".encode()).hexdigest()
    assert dlts.password == expected
    answer = httpx.get(f"{dlts.url}api/user", params={"email": dlts.email, "password": expected})
    assert answer.status_code == 200
    assert answer.json() == {"email": dlts.email, "password": expected}


@pytest.mark.parametrize(
    ("params", "body"),
    [
        ({}, "Forbidden"),
        ({"email": "trialfleet@example.com"}, "Forbidden"),
        ({"email": "trialfleet@example.com", "password": ""}, "Forbidden"),
        ({"password": "whatever"}, "Forbidden"),
        ({"email": "trialfleet@example.com", "password": "00" * 16}, "Invalid token"),
        ({"email": "trialfleet@example.com", "password": "not-hex"}, "Invalid token"),
    ],
)
def test_bad_credentials_answer_403_with_koa_text(
    dlts: DltsEmulator, params: dict[str, str], body: str
) -> None:
    answer = httpx.get(f"{dlts.url}api/v2/clusters/{dlts.cluster}/jobs/some-job", params=params)
    assert answer.status_code == 403
    assert answer.text == body
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"


def test_another_users_password_does_not_open_this_email(dlts: DltsEmulator) -> None:
    params = {"email": dlts.email, "password": dlts.password_for("someone@example.com")}
    assert httpx.get(f"{dlts.url}api/user", params=params).status_code == 403


def test_legacy_token_parameter_and_nodes_lenient_hex_parsing(dlts: DltsEmulator) -> None:
    """``password`` falls back to ``token``; Buffer.from(hex) takes upper case and stops at the first bad pair."""
    for params in (
        {"email": dlts.email, "token": dlts.password},
        {"email": dlts.email, "password": dlts.password.upper()},
        {"email": dlts.email, "password": dlts.password + "zz-trailing"},
    ):
        assert httpx.get(f"{dlts.url}api/user", params=params).status_code == 200, params


def test_unknown_cluster_is_404_before_credentials_are_checked(dlts: DltsEmulator) -> None:
    answer = httpx.get(
        f"{dlts.url}api/clusters/nowhere/jobs/x/status", params={"email": "a@b", "password": "0"}
    )
    assert (answer.status_code, answer.text) == (404, "Cluster is not found")
    answer = httpx.get(f"{dlts.url}api/v2/clusters/nowhere/jobs/x", params=dlts.credentials)
    assert (answer.status_code, answer.text) == (404, "Cluster is not found")


def test_default_cluster_is_the_first_configured(dlts: DltsEmulator, client: httpx.Client) -> None:
    answer = client.get("api/clusters/.default")
    assert answer.status_code == 200
    assert client.get(f"api/clusters/{dlts.cluster}").json() == answer.json()


def test_an_email_outside_the_acl_authenticates_but_is_denied(dlts: DltsEmulator) -> None:
    stranger = "stranger@example.com"
    params = {"email": stranger, "password": dlts.password_for(stranger)}
    answer = httpx.post(
        f"{dlts.url}api/clusters/{dlts.cluster}/jobs", params=params, json=nni_job_body(dlts, "true")
    )
    assert answer.status_code == 200
    assert answer.json() == {"error": "Cannot create job!Access Denied!"}
    team = httpx.get(f"{dlts.url}api/teams/{dlts.team}/clusters/{dlts.cluster}", params=params)
    assert (team.status_code, team.text) == (404, "Team is not found")


def test_configurable_users_and_teams(tmp_path: Path) -> None:
    users = [User("ana@corp.example", {"vision": "Admin"}), User("bo@corp.example", {"speech": "User"})]
    teams = [Team("vision", gpu_type="V100", gpus=16), Team("speech", gpu_type="K80")]
    with DltsEmulator(tmp_path / "nfs", users=users, teams=teams, master_token="s3cret") as dlts:
        assert dlts.email == "ana@corp.example" and dlts.team == "vision"
        params = {"email": "bo@corp.example", "password": hashlib.md5(b"bo@corp.example:s3cret").hexdigest()}
        answer = httpx.get(f"{dlts.url}api/teams", params=params)
        assert answer.status_code == 200
        assert [t["id"] for t in answer.json()] == ["speech"]
        vc = httpx.get(f"{dlts.url}api/teams/speech/clusters/.default", params=params).json()
        assert vc["metadata"] == '{"K80":{"num_gpu_per_node":4}}'
