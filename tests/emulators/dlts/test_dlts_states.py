"""The job state machine as a polling client sees it, and the status operations DLTS allows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator, ManualClock, Team, User
from tests.emulators.dlts.testing import job, poll, process_alive, set_status, submit, wait_for


def test_a_succeeding_job_shows_every_state(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "echo done")
    seen, detail = poll(client, dlts, job_id)
    assert seen == ["unapproved", "queued", "scheduling", "running", "finished"]
    (pod,) = detail["jobStatusDetail"]
    started, finished = datetime.fromisoformat(pod["startedAt"]), datetime.fromisoformat(pod["finishedAt"])
    assert started <= finished and started.utcoffset() is not None
    assert pod["message"] == f"started at: {pod['startedAt']}\nfinished at {pod['finishedAt']}. "
    assert dlts.history(job_id) == seen


def test_a_failing_command_fails_without_an_exit_code_field(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "echo oops >&2; exit 3")
    seen, detail = poll(client, dlts, job_id)
    assert seen[-2:] == ["running", "failed"]
    assert "exitCode" not in detail and "failed at " in detail["jobStatusDetail"][0]["message"]
    assert client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json() == {"status": "failed"}
    log = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/log").json()["log"][job_id]
    assert log.startswith("oops\n") and log.endswith(" : 3\n")  # bootstrap.sh's `date` ": ${EXIT_CODE}"


def test_unknown_jobs(dlts: DltsEmulator, client: httpx.Client) -> None:
    """v2 detail: {} with 200 (NNI read UNKNOWN); v1 detail: the RestAPI crashes, so 502; status: 404."""
    answer = client.get(f"api/v2/clusters/{dlts.cluster}/jobs/no-such-job")
    assert (answer.status_code, answer.json()) == (200, {})
    answer = client.get(f"api/clusters/{dlts.cluster}/jobs/no-such-job")
    assert (answer.status_code, answer.text) == (502, "Bad Gateway")
    answer = client.get(f"api/clusters/{dlts.cluster}/jobs/no-such-job/status")
    assert (answer.status_code, answer.text) == (404, "Not Found")
    assert set_status(client, dlts, "no-such-job", "killing") == "Cannot Kill the job. Job ID:no-such-job"


def test_states_wait_for_the_clock_and_for_a_poll(tmp_path: Path) -> None:
    clock = ManualClock()
    dlts = DltsEmulator(tmp_path / "nfs", clock=clock, delays={"unapproved": 30, "queued": 30})
    with dlts, httpx.Client(base_url=dlts.url, params=dlts.credentials) as client:
        job_id = submit(client, dlts, "true")
        assert job(client, dlts, job_id)["jobTime"] == "Mon, 01 Jun 2020 00:00:00 GMT"
        dlts.step()
        assert job(client, dlts, job_id)["jobStatus"] == "unapproved"  # 30 s have not passed
        clock.advance(29.9)
        dlts.step()
        assert dlts.job(job_id)["status"] == "unapproved"
        clock.advance(0.1)
        dlts.step()
        assert dlts.job(job_id)["status"] == "queued"
        clock.advance(60)
        dlts.step()
        assert dlts.job(job_id)["status"] == "queued"  # nobody has read "queued" yet
        assert job(client, dlts, job_id)["jobStatus"] == "queued"
        dlts.step()
        assert dlts.job(job_id)["status"] == "scheduling"


def test_the_scheduling_latency_knob_keeps_every_job_queued_that_long(tmp_path: Path) -> None:
    clock = ManualClock()
    dlts = DltsEmulator(tmp_path / "nfs", clock=clock, wait_for_poll=False)
    dlts.set_scheduling_latency(10)
    with dlts, httpx.Client(base_url=dlts.url, params=dlts.credentials) as client:
        job_id = submit(client, dlts, "true")
        clock.advance(1)
        dlts.step()  # approved: queued from now on
        assert dlts.job(job_id)["status"] == "queued"
        clock.advance(9.9)
        dlts.step()
        assert dlts.job(job_id)["status"] == "queued"  # 10 s in the queue have not passed
        clock.advance(0.1)
        dlts.step()
        assert dlts.history(job_id)[:3] == ["unapproved", "queued", "scheduling"]


def test_kill_ends_the_whole_process_tree(dlts: DltsEmulator, client: httpx.Client) -> None:
    pid_file = dlts.work_dir() / "child.pid"
    job_id = submit(client, dlts, "sleep 300 & echo $! > /work/child.pid; wait")
    poll(client, dlts, job_id, "running")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), message="the job to start its child")
    background = int(pid_file.read_text())
    assert process_alive(background)
    assert set_status(client, dlts, job_id, "killing") == "Success, the job is scheduled to be terminated."
    seen, detail = poll(client, dlts, job_id, "killed")
    assert seen == ["killing", "killed"]
    (pod,) = detail["jobStatusDetail"]
    assert pod["message"].startswith("started at: ") and "\nkilled at " in pod["message"]
    wait_for(lambda: not process_alive(background), message="the background sleep to die")
    assert set_status(client, dlts, job_id, "killing") == f"Cannot Kill the job. Job ID:{job_id}"


def test_killing_a_waiting_job_reports_the_kill_time_as_start(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    dlts.faults.hold("queued")
    job_id = submit(client, dlts, "true")
    poll(client, dlts, job_id, "queued")
    set_status(client, dlts, job_id, "killing")
    _, detail = poll(client, dlts, job_id, "killed")
    (pod,) = detail["jobStatusDetail"]
    assert pod["startedAt"] == pod["finishedAt"]
    # the detail comes from the job's pods, and a queued job has none: the DB's "waiting" message is gone
    assert pod["message"] == f"killed at {pod['finishedAt']}. "


def test_pause_and_resume(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "echo run; sleep 300")
    poll(client, dlts, job_id, "running")
    wait_for(lambda: "run\n" in dlts.job(job_id)["log"], message="the job to print")
    first_pid = dlts.job(job_id)["pid"]
    assert set_status(client, dlts, job_id, "pausing") == "Success, the job is scheduled to be paused."
    seen, _ = poll(client, dlts, job_id, "paused")
    assert seen == ["pausing", "paused"]
    assert set_status(client, dlts, job_id, "pausing") == f"Cannot pause the job. Job ID:{job_id}"
    # "queued" means resume, and a resumed job starts over from unapproved
    assert set_status(client, dlts, job_id, "queued") == "Success, the job is scheduled to be resumed."
    seen, _ = poll(client, dlts, job_id, "running")
    assert seen == ["unapproved", "queued", "scheduling", "running"]
    assert dlts.job(job_id)["pid"] != first_pid
    set_status(client, dlts, job_id, "killing")
    poll(client, dlts, job_id, "killed")
    assert dlts.job(job_id)["log"].count("run\n") == 2


def test_status_values_outside_the_schema_are_400(dlts: DltsEmulator, client: httpx.Client) -> None:
    for body in ({"status": "killed"}, {"status": "running"}):
        answer = client.put(f"api/clusters/{dlts.cluster}/jobs/x/status", json=body)
        assert (answer.status_code, answer.text) == (
            400,
            ".status should be equal to one of the allowed values",
        )
    answer = client.put(f"api/clusters/{dlts.cluster}/jobs/x/status", json={})
    assert (answer.status_code, answer.text) == (400, " should have required property 'status'")


@pytest.fixture
def two_users(tmp_path: Path) -> Iterator[DltsEmulator]:
    users = [
        User("ana@example.com", {"platform": "User"}),
        User("bo@example.com", {"platform": "User"}),
        User("cy@example.com", {"platform": "Admin"}),
    ]
    with DltsEmulator(tmp_path / "nfs", users=users, kill_grace=0.2, auto_approve=False) as dlts:
        yield dlts


def test_approval_and_who_may_see_and_change_a_job(two_users: DltsEmulator) -> None:
    dlts = two_users

    def client_of(email: str) -> httpx.Client:
        return httpx.Client(base_url=dlts.url, params={"email": email, "password": dlts.password_for(email)})

    with (
        client_of("ana@example.com") as ana,
        client_of("bo@example.com") as bo,
        client_of("cy@example.com") as cy,
    ):
        job_id = submit(ana, dlts, "sleep 300")
        assert job(bo, dlts, job_id) == {}  # neither owner nor collaborator
        assert set_status(bo, dlts, job_id, "killing") == f"Cannot Kill the job. Job ID:{job_id}"
        dlts.step()
        assert job(cy, dlts, job_id)["jobStatus"] == "unapproved"  # no automatic approval
        assert set_status(cy, dlts, job_id, "approved") == "Success, the job has been approved."
        assert set_status(cy, dlts, job_id, "approved") == f"Cannot approve the job. Job ID:{job_id}"
        poll(ana, dlts, job_id, "running")
        batch = cy.post(
            f"api/clusters/{dlts.cluster}/jobs/status", json={"status": {job_id: "killing", "x": "killing"}}
        )
        assert batch.status_code == 200
        assert batch.json() == {"killing": f'{{"result":{{"{job_id}":"successfully killed"}}}}\n'}
        poll(ana, dlts, job_id, "killed")


def test_user_quota_holds_jobs_for_approval(tmp_path: Path) -> None:
    teams = [Team("platform", gpus=8, user_quota=2)]
    with (
        DltsEmulator(tmp_path / "nfs", teams=teams, kill_grace=0.2) as dlts,
        httpx.Client(base_url=dlts.url, params=dlts.credentials) as client,
    ):
        first = submit(client, dlts, "sleep 300", resourcegpu=2)
        poll(client, dlts, first, "running")
        second = submit(client, dlts, "true", resourcegpu=1)
        wait_for(lambda: "exceeds the user quota" in str(job(client, dlts, second)["jobStatusDetail"]))
        detail = job(client, dlts, second)
        assert detail["jobStatus"] == "unapproved"
        assert detail["jobStatusDetail"] == [
            {
                "message": (
                    "exceeds the user quota in VC: 2 (used) + 1 (requested) > 2 (user quota). Will need admin approval."
                )
            }
        ]
        for _ in range(3):
            dlts.step()
        assert job(client, dlts, second)["jobStatus"] == "unapproved"
        # get_access_to_job lets the owner approve too, past the user quota
        assert set_status(client, dlts, second, "approved") == "Success, the job has been approved."
        seen, _ = poll(client, dlts, second)
        assert seen == ["queued", "scheduling", "running", "finished"]
        assert job(client, dlts, first)["jobStatus"] == "running"


def test_jobs_beyond_the_vc_quota_stay_queued(tmp_path: Path) -> None:
    with (
        DltsEmulator(tmp_path / "nfs", teams=[Team("platform", gpus=1)], kill_grace=0.2) as dlts,
        httpx.Client(base_url=dlts.url, params=dlts.credentials) as client,
    ):
        first = submit(client, dlts, "sleep 300", resourcegpu=1)
        poll(client, dlts, first, "running")
        second = submit(client, dlts, "true", resourcegpu=1)
        wait_for(lambda: "Waiting for resource" in str(job(client, dlts, second)["jobStatusDetail"]))
        for _ in range(3):
            dlts.step()
        assert job(client, dlts, second)["jobStatus"] == "queued"
        set_status(client, dlts, first, "killing")
        seen, _ = poll(client, dlts, second)
        # a killing job no longer counts for the scheduler, so the second may start before the first is killed
        assert seen[-3:] == ["scheduling", "running", "finished"] and seen[0] in ("queued", "scheduling")
