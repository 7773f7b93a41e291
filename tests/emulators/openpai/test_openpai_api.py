"""The REST surface around jobs: auth, listing, config, tags, execution type, storages, VCs, info, errors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
import yaml

from tests.emulators.openpai import ClusterConfig, ManualClock, OpenPAIEmulator, Timing, User
from tests.emulators.openpai.conftest import FAST
from tests.emulators.openpai.testing import protocol, submit, wait_for, watch

GUEST = {"code": "UnauthorizedUserError", "message": "Guest is not allowed to do this operation."}
INVALID = {"code": "UnauthorizedUserError", "message": "Your token is invalid."}


def test_no_header_is_a_guest_and_a_bad_token_is_invalid(pai: OpenPAIEmulator) -> None:
    response = httpx.get(pai.api + "/jobs")
    assert response.status_code == 401 and response.json() == GUEST
    for header in ("Bearer not-a-token", "Basic " + base64.b64encode(b"alice:nope").decode(), "Token x"):
        response = httpx.get(pai.api + "/jobs", headers={"Authorization": header})
        assert response.status_code == 401 and response.json() == INVALID


def test_login_gives_a_bearer_token(pai: OpenPAIEmulator) -> None:
    form = {"username": "alice", "password": "openpai-password", "expiration": "3600"}
    response = httpx.post(pai.api + "/authn/basic/login", data=form)
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["user", "token", "admin"] and body["user"] == "alice" and body["admin"] is False
    header = {"Authorization": f"Bearer {body['token']}"}
    assert httpx.get(pai.api + "/jobs", headers=header).status_code == 200
    wrong = httpx.post(pai.api + "/authn/basic/login", data={**form, "password": "wrong-password"})
    assert wrong.status_code == 400 and wrong.json() == {
        "code": "IncorrectPasswordError",
        "message": "Password is incorrect.",
    }
    short = httpx.post(pai.api + "/authn/basic/login", data={**form, "expiration": "30"})
    assert short.json() == {
        "code": "InvalidParametersError",
        "message": 'child "expiration" fails because ["expiration" must be larger than or equal to 60]',
    }
    nobody = httpx.post(pai.api + "/authn/basic/login", json={"username": "bob", "password": "123456"})
    assert nobody.json() == {"code": "NoUserError", "message": "User bob is not found."}


def test_application_tokens_go_in_basic_auth(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    response = client.post("/tokens/application")
    assert response.status_code == 200 and response.json()["application"] is True
    token = response.json()["token"]
    basic = {"Authorization": "Basic " + base64.b64encode(f"alice:{token}".encode()).decode()}
    assert httpx.get(pai.api + "/jobs", headers=basic).status_code == 200
    as_bob = {"Authorization": "Basic " + base64.b64encode(f"admin:{token}".encode()).decode()}
    assert httpx.get(pai.api + "/jobs", headers=as_bob).json() == INVALID
    refused = httpx.post(pai.api + "/tokens/application", headers=basic)
    assert refused.status_code == 403
    assert refused.json() == {
        "code": "ForbiddenUserError",
        "message": "Applications are not allowed to do this operation.",
    }


def test_user_tokens_expire_after_seven_days(tmp_path: Path) -> None:
    clock = ManualClock()
    config = ClusterConfig(timing=Timing(delays=dict(FAST)))
    with OpenPAIEmulator(config, clock=clock, workdir=tmp_path / "cluster") as pai:
        headers = pai.auth_headers("alice")
        assert httpx.get(pai.api + "/jobs", headers=headers).status_code == 200
        pai.advance(7 * 24 * 3600 - 1)
        assert httpx.get(pai.api + "/jobs", headers=headers).status_code == 200
        pai.advance(1)
        response = httpx.get(pai.api + "/jobs", headers=headers)
        assert response.status_code == 401 and response.json() == INVALID


def test_the_scheduling_latency_knob_keeps_every_attempt_waiting_that_long(tmp_path: Path) -> None:
    clock = ManualClock()
    with OpenPAIEmulator(
        ClusterConfig(timing=Timing(delays=dict(FAST))), clock=clock, workdir=tmp_path / "c"
    ) as pai:
        pai.set_scheduling_latency(10)
        client = httpx.Client(base_url=pai.api, headers=pai.auth_headers("alice"))
        assert submit(client, protocol("queued", ["true"])).status_code == 202
        pai.advance(9.9)
        assert pai.job("alice~queued").state == "AttemptCreationPending"  # 10 s in the queue have not passed
        pai.advance(0.2)
        assert pai.job("alice~queued").state != "AttemptCreationPending"


def test_configured_tokens_are_accepted(tmp_path: Path) -> None:
    config = ClusterConfig()
    config.users[1].tokens.append("static-token-of-alice")
    with OpenPAIEmulator(config, workdir=tmp_path / "cluster") as pai:
        response = httpx.get(pai.api + "/jobs", headers={"Authorization": "Bearer static-token-of-alice"})
        assert response.status_code == 200


def test_listing_filters_pages_and_counts(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    for name in ("one", "two", "three"):
        assert submit(client, protocol(name, ["true"])).status_code == 202
    admin = httpx.Client(base_url=pai.api, headers=pai.auth_headers("admin"))
    assert submit(admin, protocol("theirs", ["true"])).status_code == 202
    for name in ("alice~one", "alice~two", "alice~three", "admin~theirs"):
        watch(client, name)
    mine = client.get("/jobs", params={"username": "alice"}).json()
    assert sorted(row["name"] for row in mine) == ["one", "three", "two"]
    assert {row["username"] for row in client.get("/jobs").json()} == {"alice", "admin"}
    page = client.get(
        "/jobs", params={"username": "alice,admin", "limit": "2", "withTotalCount": "true"}
    ).json()
    assert page["totalCount"] == 4 and len(page["data"]) == 2
    assert client.get("/jobs", params={"state": "RUNNING"}).json() == []
    assert len(client.get("/jobs", params={"state": "SUCCEEDED,FAILED"}).json()) == 4
    ordered = client.get("/jobs", params={"order": "jobName,ASC"}).json()
    assert [row["name"] for row in ordered] == ["one", "theirs", "three", "two"]
    row = mine[0]
    assert set(row) >= {
        "debugId",
        "name",
        "username",
        "state",
        "subState",
        "executionType",
        "retries",
        "submissionTime",
        "appExitCode",
        "virtualCluster",
        "totalGpuNumber",
        "totalTaskNumber",
    }
    too_many = client.get("/jobs", params={"limit": "50001"})
    assert too_many.status_code == 400
    assert too_many.json() == {"code": "InvalidParametersError", "message": "Limit exceeds max number 50000."}
    assert client.get("/jobs", params={"limit": "50000"}).status_code == 200


def test_the_config_comes_back_as_json_text_typed_yaml(client: httpx.Client) -> None:
    text = protocol("configured", ["echo 1"], parameters={"x": 1.0})
    submit(client, text)
    response = client.get("/jobs/alice~configured/config")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/yaml; charset=utf-8"
    assert json.loads(response.text)["parameters"] == {"x": 1}  # JavaScript has no 1.0
    missing = client.get("/jobs/alice~nothing/config")
    assert missing.status_code == 404 and missing.json() == {
        "code": "NoJobError",
        "message": "Job alice~nothing is not found.",
    }


def test_execution_type_is_checked_and_owned(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    pai.set_capacity("default", cpu=0, memory=0, gpu=0)  # keep the job waiting
    submit(client, protocol("owned", ["true"]))
    bad = client.put("/jobs/alice~owned/executionType", json={"value": "PAUSE"})
    assert bad.status_code == 400
    assert bad.json() == {
        "code": "InvalidParametersError",
        "message": 'child "value" fails because ["value" must be one of [STOP, START]]',
    }
    extra = client.put("/jobs/alice~owned/executionType", json={"value": "STOP", "force": True})
    assert extra.json() == {"code": "InvalidParametersError", "message": '"force" is not allowed'}
    missing = client.put("/jobs/alice~nothing/executionType", json={"value": "STOP"})
    assert missing.status_code == 404
    pai.config.users.append(User("bob"))
    bob = client.put(
        "/jobs/alice~owned/executionType", json={"value": "STOP"}, headers=pai.auth_headers("bob")
    )
    assert bob.status_code == 403
    assert bob.json() == {
        "code": "ForbiddenUserError",
        "message": "User bob is not allowed to execute job alice~owned.",
    }
    admin = client.put(
        "/jobs/alice~owned/executionType", json={"value": "STOP"}, headers=pai.auth_headers("admin")
    )
    assert admin.status_code == 202
    assert watch(client, "alice~owned")[1]["jobStatus"]["state"] == "STOPPED"


def test_tags(client: httpx.Client) -> None:
    submit(client, protocol("tagged", ["true"]))
    added = client.put("/jobs/alice~tagged/tag", json={"value": "nni"})
    assert added.json() == {"status": 200, "message": "Add tag nni for job alice~tagged successfully."}
    assert client.get("/jobs/alice~tagged").json()["tags"] == ["nni"]
    assert [r["name"] for r in client.get("/jobs", params={"tagsContain": "nni"}).json()] == ["tagged"]
    assert client.get("/jobs", params={"tagsNotContain": "nni"}).json() == []
    comma = client.put("/jobs/alice~tagged/tag", json={"value": "a,b"})
    assert (
        comma.json()["message"]
        == 'child "value" fails because ["value" with value "a,b" fails to match the value pattern]'
    )
    gone = client.request("DELETE", "/jobs/alice~tagged/tag", json={"value": "other"})
    assert gone.status_code == 404 and gone.json() == {
        "code": "NoTagError",
        "message": "Tag other is not found for job alice~tagged.",
    }
    deleted = client.request("DELETE", "/jobs/alice~tagged/tag", json={"value": "nni"})
    assert deleted.json() == {"status": 200, "message": "Delete tag nni from job alice~tagged successfully."}


def test_storages_virtual_clusters_and_info(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    assert client.get("/storages").json() == {
        "storages": [{"name": "confignfs", "share": True, "volumeName": "confignfs-pv", "default": True}]
    }
    assert client.get("/storages", params={"default": "true"}).json()["storages"][0]["name"] == "confignfs"
    detail = client.get("/storages/confignfs").json()
    assert (
        detail["type"] == "nfs" and detail["readOnly"] is False and set(detail["data"]) == {"server", "path"}
    )
    assert client.get("/storages/nope").json() == {
        "code": "NoStorageError",
        "message": "Storage nope is not found.",
    }
    clusters = client.get("/virtual-clusters").json()
    assert list(clusters) == ["default"]
    default = clusters["default"]
    assert default["capacity"] == 100 and default["usedCapacity"] == 0 and default["maxCapacity"] == 100
    assert default["resourcesTotal"] == {"cpu": 64, "memory": 262144, "gpu": 8, "vCores": 64, "GPUs": 8}
    assert client.get("/virtual-clusters/gpu").json() == {
        "code": "NoVirtualClusterError",
        "message": "Vc gpu not found",
    }
    bad = httpx.get(pai.api + "/virtual-clusters/bad-name")  # checked before the token
    assert bad.status_code == 400
    assert bad.json()["message"] == "VC name should only contain alpha-numeric and underscore characters"
    info = httpx.get(pai.api + "/info").json()
    assert info == {
        "name": "PAI RESTful API",
        "version": "v1.8.0",
        "launcherType": "k8s",
        "authnMethod": "basic",
    }


def test_a_vc_the_user_may_not_use_is_forbidden(client: httpx.Client) -> None:
    response = submit(client, protocol("elsewhere", ["true"], defaults={"virtualCluster": "gpu"}))
    assert response.status_code == 403
    assert response.json() == {
        "code": "ForbiddenUserError",
        "message": "User alice is not allowed to do operation in gpu",
    }


def test_unknown_routes_and_bodies(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    unknown = client.get("/jobs/alice~x/nothing", params={"a": "1"})
    assert unknown.status_code == 404
    assert unknown.json() == {
        "code": "NoApiError",
        "message": "API /api/v2/jobs/alice~x/nothing?a=1 is not found.",
    }
    assert client.delete("/jobs").json()["code"] == "NoApiError"  # v2 has no job deletion
    assert client.get("/jobs/alice~x").json() == {
        "code": "NoJobError",
        "message": "Job alice~x is not found.",
    }
    huge = submit(client, protocol("huge", ["echo " + "x" * 110_000]))
    assert huge.status_code == 413 and huge.json() == {"message": "request entity too large"}
    broken = client.put(
        "/jobs/alice~x/executionType", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert broken.status_code == 400 and list(broken.json()) == ["message"]
    assert httpx.get(pai.url + "/elsewhere").status_code == 404


def test_detail_of_a_running_multi_role_job(client: httpx.Client, tmp_path: Path) -> None:
    text = protocol(
        "roles",
        ["while [ ! -e /mnt/confignfs/stop ]; do sleep 0.02; done"],
        extras={"storages": [{"name": "confignfs"}]},
    )
    spec = yaml.safe_load(text)
    spec["taskRoles"]["ps"] = dict(spec["taskRoles"]["main"], instances=2)
    submit(client, yaml.safe_dump(spec))
    _, detail = watch(client, "alice~roles", until=("RUNNING",))
    wait_for(
        lambda: all(
            t["taskState"] == "RUNNING"
            for r in client.get("/jobs/alice~roles").json()["taskRoles"].values()
            for t in r["taskStatuses"]
        )
    )
    detail = client.get("/jobs/alice~roles").json()
    assert (
        sorted(detail["taskRoles"]) == ["main", "ps"] and len(detail["taskRoles"]["ps"]["taskStatuses"]) == 2
    )
    assert detail["jobStatus"]["appExitCode"] is None and detail["jobStatus"]["appExitSpec"] is None
    summary = client.get("/jobs").json()[0]
    assert (
        summary["totalTaskNumber"] == 3
        and summary["totalTaskRoleNumber"] == 2
        and summary["state"] == "RUNNING"
    )
    (tmp_path / "nfs" / "stop").touch()
    assert watch(client, "alice~roles")[1]["jobStatus"]["state"] == "SUCCEEDED"


@pytest.mark.parametrize("value", ["STOP", "START"])
def test_execution_type_after_completion_changes_nothing(client: httpx.Client, value: str) -> None:
    submit(client, protocol("finished", ["true"]))
    watch(client, "alice~finished")
    assert client.put("/jobs/alice~finished/executionType", json={"value": value}).status_code == 202
    assert client.get("/jobs/alice~finished").json()["jobStatus"]["state"] == "SUCCEEDED"
