"""Teams, VCs, job lists, priorities and the router's own answers (404, 405, case and trailing slashes)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.emulators.dlts import ClusterSpec, DltsEmulator, Team, User
from tests.emulators.dlts.testing import poll, submit


def test_vc_record_has_metadata_as_a_json_string(dlts: DltsEmulator, client: httpx.Client) -> None:
    vc = client.get(f"api/teams/{dlts.team}/clusters/{dlts.cluster}").json()
    assert vc["vcName"] == dlts.team
    assert isinstance(vc["metadata"], str)
    assert next(iter(json.loads(vc["metadata"]))) == "P40"  # what NNI took as gpuType
    assert json.loads(vc["quota"]) == {"P40": 8}
    assert vc["gpu_avaliable"] == vc["gpu_available"] == {"Standard_P40": 8}
    assert client.get(f"api/teams/other/clusters/{dlts.cluster}").text == "Team is not found"


def test_vc_usage_counts_running_jobs(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "sleep 300", resourcegpu=3)
    poll(client, dlts, job_id, "running")
    vc = client.get(f"api/teams/{dlts.team}/clusters/{dlts.cluster}").json()
    assert vc["gpu_used"] == {"Standard_P40": 3} and vc["gpu_available"] == {"Standard_P40": 5}
    assert vc["user_status"] == [{"userName": "trialfleet", "userGPU": {"Standard_P40": 3}}]
    v2 = client.get(f"api/v2/teams/{dlts.team}/clusters/{dlts.cluster}").json()
    assert v2["types"]["Standard_P40"]["gpu"] == {
        "total": 8,
        "unschedulable": 0,
        "used": 3,
        "preemptable": 0,
        "available": 5,
    }
    assert v2["users"]["trialfleet"]["types"]["Standard_P40"]["gpu"]["used"] == 3


def test_teams_across_clusters(tmp_path: Path) -> None:
    clusters = [ClusterSpec("east", tmp_path / "east"), ClusterSpec("west", tmp_path / "west")]
    teams = [Team("platform", gpus=8, user_quota=2)]
    users = [User("ana@example.com", {"platform": "Admin"})]
    with (
        DltsEmulator(tmp_path, clusters=clusters, teams=teams, users=users) as dlts,
        httpx.Client(base_url=dlts.url, params=dlts.credentials) as client,
    ):
        listing = client.get("api/teams").json()
        entry = {"admin": True, "gpus": {"P40": {"perNode": 4, "quota": 8}, "user_quota": {}}, "userQuota": 2}
        assert listing == [{"id": "platform", "clusters": [{"id": "east", **entry}, {"id": "west", **entry}]}]
        assert client.get("api/clusters/.default").json() == client.get("api/clusters/east").json()
        answer = client.post(
            "api/clusters/west/jobs",
            json={
                "vcName": "platform",
                "jobName": "w",
                "jobType": "training",
                "image": "i",
                "cmd": "true",
                "jobtrainingtype": "RegularJob",
            },
        )
        job_id = answer.json()["jobId"]
        assert client.get(f"api/v2/clusters/east/jobs/{job_id}").json() == {}
        assert client.get(f"api/v2/clusters/west/jobs/{job_id}").json()["jobId"] == job_id
        jobs = client.get("api/teams/platform/jobs").json()
        assert [(j["jobId"], j["cluster"], j["priority"]) for j in jobs] == [(job_id, "west", 100)]


def test_team_job_lists_v1_and_v2(dlts: DltsEmulator, client: httpx.Client) -> None:
    done = submit(client, dlts, "true", jobName="done")
    poll(client, dlts, done)
    waiting = submit(client, dlts, "true", jobName="waiting", jobPriority=150)
    v1 = client.get(f"api/teams/{dlts.team}/jobs", params={**dlts.credentials, "limit": "5"}).json()
    assert {j["jobId"]: j["priority"] for j in v1} == {done: 100, waiting: 150}
    assert all(j["cluster"] == dlts.cluster and "errorMsg" in j for j in v1)
    v2 = client.get(f"api/v2/clusters/{dlts.cluster}/teams/{dlts.team}/jobs").json()
    assert {j["jobId"] for j in v2} == {done, waiting}
    assert set(v2[0]) == {
        "jobId",
        "jobName",
        "jobParams",
        "jobStatus",
        "jobStatusDetail",
        "jobTime",
        "jobType",
        "priority",
        "userName",
        "vcName",
    }


def test_priority_is_clamped_to_the_users_range(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "sleep 300")
    answer = client.put(f"api/clusters/{dlts.cluster}/jobs/{job_id}/priority", json={"priority": 999})
    assert answer.status_code == 200 and answer.json() == {job_id: 200}
    answer = client.put(f"api/clusters/{dlts.cluster}/jobs/{job_id}/priority", json={"priority": "high"})
    assert (answer.status_code, answer.text) == (400, ".priority should be number")


def test_router_answers(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_url = f"api/clusters/{dlts.cluster}/jobs/x"
    answer = client.delete(job_url)
    assert (answer.status_code, answer.text, answer.headers["allow"]) == (
        405,
        "Method Not Allowed",
        "GET, HEAD",
    )
    assert client.get("api/nothing/here").status_code == 404
    assert client.get("index.html").status_code == 404
    assert client.get("api/").json() == {"version": "0.1.0"}
    assert client.get("api/v2/").json() == {"version": "0.1.0"}
    # the v1 router ignores case and a trailing slash; the v2 router is strict and case-sensitive
    job_id = submit(client, dlts, "true")
    answer = client.get(f"api/CLUSTERS/{dlts.cluster}/Jobs/{job_id}/STATUS/")
    assert answer.status_code == 200 and "status" in answer.json()
    assert client.get(f"api/v2/clusters/{dlts.cluster}/jobs/{job_id}").json()["jobId"] == job_id
    assert client.get(f"api/v2/clusters/{dlts.cluster}/jobs/{job_id}/").text == "Not Found"
    assert client.get(f"api/v2/Clusters/{dlts.cluster}/jobs/{job_id}").text == "Not Found"
    assert client.get(f"API/clusters/{dlts.cluster}/jobs/{job_id}/status").status_code == 404  # koa-mount
    answer = client.get(f"{job_url}/commands")
    assert answer.status_code == 501 and "not emulated" in answer.text
