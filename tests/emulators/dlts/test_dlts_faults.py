"""Fault knobs: transient 5xx, 200-with-error submits, launcher errors, lost and preempted jobs, held states."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator
from tests.emulators.dlts.testing import job, nni_job_body, poll, process_alive, set_status, submit, wait_for


def test_transient_5xx_then_recovery(dlts: DltsEmulator, client: httpx.Client) -> None:
    dlts.faults.http_error(503, count=2, method="GET", path=r"/api/v2/")
    url = f"api/v2/clusters/{dlts.cluster}/jobs/x"
    assert client.get(f"api/teams/{dlts.team}/clusters/{dlts.cluster}").status_code == 200  # path not matched
    for _ in range(2):
        answer = client.get(url)
        assert (answer.status_code, answer.text) == (503, "Service Unavailable")
    assert client.get(url).json() == {}
    dlts.faults.http_error(502)
    assert client.post(f"api/clusters/{dlts.cluster}/jobs", json={}).text == "Bad Gateway"


def test_submit_error_with_http_200_creates_nothing(dlts: DltsEmulator, client: httpx.Client) -> None:
    dlts.faults.submit_error()
    answer = client.post(f"api/clusters/{dlts.cluster}/jobs", json=nni_job_body(dlts, "true"))
    assert answer.status_code == 200
    assert answer.json() == {"error": "Cannot create job!Cannot schedule job. Cannot add job into database."}
    assert client.get(f"api/v2/clusters/{dlts.cluster}/teams/{dlts.team}/jobs").json() == []
    assert "jobId" in client.post(f"api/clusters/{dlts.cluster}/jobs", json=nni_job_body(dlts, "true")).json()


def test_launch_errors_turn_the_job_error_after_the_retries(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = str(uuid.uuid4())
    dlts.fail_launch("node out of disk", job_id=job_id)  # as many failures as the launcher retries (5)
    other = submit(client, dlts, "true")
    submit(client, dlts, "true", jobId=job_id)
    assert poll(client, dlts, other)[0][-1] == "finished"  # the fault was for the other job only
    seen, detail = poll(client, dlts, job_id)
    assert seen == ["unapproved", "queued", "error"]
    (pod,) = detail["jobStatusDetail"]
    assert pod["message"].endswith(f"\nerror at {pod['finishedAt']}. Server error in job submission")
    status = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json()
    assert status == {"status": "error", "message": "Cannot submit job!node out of disk"}


def test_fewer_launch_errors_than_retries_only_delay_the_job(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    dlts.faults.launch_error(count=2)
    job_id = submit(client, dlts, "true")
    assert poll(client, dlts, job_id)[0] == ["unapproved", "queued", "scheduling", "running", "finished"]


def test_a_job_without_image_ends_in_error(dlts: DltsEmulator, client: httpx.Client) -> None:
    """The pod's ``image: null`` is refused by Kubernetes and the launcher's handler then trips on e.message."""
    job_id = submit(client, dlts, "true", image="")
    assert poll(client, dlts, job_id)[0][-1] == "error"
    message = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json()["message"]
    assert message == "Cannot submit job!'ApiException' object has no attribute 'message'"


def test_an_unknown_training_type_stays_queued_with_an_error_message(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    job_id = submit(client, dlts, "true", jobtrainingtype="MagicJob")
    poll(client, dlts, job_id, "queued")
    wait_for(lambda: "message" in client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json())
    for _ in range(3):
        dlts.step()
    status = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json()
    assert status == {"status": "queued", "message": "ERROR: invalid jobtrainingtype: MagicJob"}


def test_a_lost_job_reads_empty(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "sleep 300")
    poll(client, dlts, job_id, "running")
    pid = dlts.job(job_id)["pid"]
    dlts.lose(job_id)
    assert job(client, dlts, job_id) == {}
    assert set_status(client, dlts, job_id, "killing") == f"Cannot Kill the job. Job ID:{job_id}"
    assert client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/log").status_code == 404
    wait_for(lambda: not process_alive(pid), message="the lost job's pod to be deleted")


def test_a_paused_job_as_a_preempted_one_looks_to_nni(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "sleep 300")
    poll(client, dlts, job_id, "running")
    dlts.pause(job_id)
    seen, _ = poll(client, dlts, job_id, "paused")
    assert seen == ["pausing", "paused"]
    with pytest.raises(ValueError, match="cannot be paused"):
        dlts.pause(job_id)


def test_preempting_a_preemptible_job_queues_it_again(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "echo start; sleep 300", preemptionAllowed="True")
    poll(client, dlts, job_id, "running")
    wait_for(lambda: "start\n" in dlts.job(job_id)["log"], message="the job to start")
    dlts.preempt(job_id)
    seen, detail = poll(client, dlts, job_id, "queued")
    assert seen[-1] == "queued" and seen[0] in ("running", "queued")  # eviction does not wait for a poll
    (pod,) = detail["jobStatusDetail"]
    assert pod["message"].startswith("started at: ") and "\nqueued at " in pod["message"]
    assert poll(client, dlts, job_id, "running")[0][-2:] == ["scheduling", "running"]
    wait_for(lambda: dlts.job(job_id)["log"].count("start\n") == 2, message="the job to start again")
    set_status(client, dlts, job_id, "killing")
    other = submit(client, dlts, "sleep 300")
    poll(client, dlts, other, "running")
    with pytest.raises(ValueError, match="not preemptible"):
        dlts.preempt(other)


def test_held_states_keep_jobs_until_released(dlts: DltsEmulator, client: httpx.Client) -> None:
    dlts.faults.hold("queued")
    job_id = submit(client, dlts, "true")
    poll(client, dlts, job_id, "queued")
    for _ in range(3):
        dlts.step()
    assert job(client, dlts, job_id)["jobStatus"] == "queued"
    dlts.faults.release("queued")
    seen, _ = poll(client, dlts, job_id)
    # "queued" was read already, so the job may leave it before this poll's first read
    assert seen[-3:] == ["scheduling", "running", "finished"] and seen[0] in ("queued", "scheduling")
