"""What a job's command really gets: the NFS paths at DLTS's container paths, DLTS's environment, its log."""

from __future__ import annotations

import json
import random
import socket
import uuid
from pathlib import Path

import httpx
import pytest

from tests.emulators.dlts import DltsEmulator
from tests.emulators.dlts.testing import job, poll, set_status, submit, wait_for

DUMP_ENV = 'python3 -c \'import json, os; print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))\''


def run_and_read(client: httpx.Client, dlts: DltsEmulator, cmd: str, **overrides: object) -> tuple[str, str]:
    job_id = submit(client, dlts, cmd, **overrides)
    seen, _ = poll(client, dlts, job_id)
    assert seen[-1] == "finished", dlts.job(job_id)["log"]
    return job_id, client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/log").json()["log"][job_id]


def test_environment_of_a_job(
    dlts: DltsEmulator, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MANAGER_ONLY", "the emulator's own environment must not leak into jobs")
    envs = [{"name": "TRIAL", "value": "a b'c"}, {"name": "PATHOLOGY", "value": "dropped by init_user.sh"}]
    job_id, log = run_and_read(client, dlts, DUMP_ENV, resourcegpu=2, envs=envs)
    seen = json.loads(log.splitlines()[0])
    env, alias = seen["env"], dlts.email.split("@")[0]
    assert seen["cwd"] == f"/home/{alias}"  # runuser -l starts in the user's home
    for prefix in ("DLWS", "DLTS"):
        assert env[f"{prefix}_JOB_ID"] == job_id
        assert env[f"{prefix}_USER_NAME"] == alias
        assert env[f"{prefix}_USER_EMAIL"] == dlts.email
        assert env[f"{prefix}_VC_NAME"] == dlts.team
        assert env[f"{prefix}_NUM_GPU_PER_WORKER"] == "2"
        assert env[f"{prefix}_ROLE_NAME"] == "master"
        assert (env[f"{prefix}_UID"], env[f"{prefix}_GID"]) == ("20001", "20000")
    assert (
        env["DLTS_JOB_TOKEN"] == dlts.password
    )  # md5(userName:master_token), usable as the dashboard password
    assert env["HOME"] == f"/home/{alias}" and env["USER"] == alias and env["POD_NAME"] == job_id
    assert len(env["NVIDIA_VISIBLE_DEVICES"].split(",")) == 2
    assert env["DLTS_PREEMPTIBLE"] == "false" and env["DLTS_LAUNCH_CMD"] == DUMP_ENV
    assert env["TRIAL"] == "a b'c"
    assert "PATHOLOGY" not in env and "TMPDIR" not in env  # NNI's "env" list is not what the template reads
    assert "DLTS_SSH_PRIVATE_KEY" not in env and "MANAGER_ONLY" not in env


def test_no_gpus_means_no_visible_devices(dlts: DltsEmulator, client: httpx.Client) -> None:
    _, log = run_and_read(client, dlts, DUMP_ENV)
    assert json.loads(log.splitlines()[0])["env"]["NVIDIA_VISIBLE_DEVICES"] == ""


def test_storage_is_mounted_at_dlts_paths(dlts: DltsEmulator, client: httpx.Client) -> None:
    work, data = dlts.work_dir(), dlts.data_dir()
    (work / "code").mkdir()
    (work / "code" / "train.py").write_text("print('training')\n")
    (data / "set.txt").write_text("imagenet\n")
    cmd = "cd /work/code && python3 train.py > /job/out.txt && cat /data/set.txt && ls ~/code && echo made > /data/new"
    job_id, log = run_and_read(client, dlts, cmd)
    assert log.startswith("imagenet\ntrain.py\n")
    job_path = job(client, dlts, job_id)["jobParams"]["jobPath"]
    assert (dlts.storage / "work" / job_path / "out.txt").read_text() == "training\n"
    assert (data / "new").read_text() == "made\n"
    # the job log manager copied the log into the job folder when the job ended
    copied = (dlts.storage / "work" / job_path / "logs" / f"log-pod-{job_id}.txt").read_text()
    assert copied == log


def test_paths_of_the_job_point_into_the_export(dlts: DltsEmulator, client: httpx.Client) -> None:
    (dlts.storage / "storage" / "sets").mkdir()
    (dlts.storage / "storage" / "sets" / "a.txt").write_text("A\n")
    (dlts.work_dir() / "proj").mkdir()
    (dlts.work_dir() / "proj" / "w.txt").write_text("W\n")
    _, log = run_and_read(
        client, dlts, "cat /data/a.txt /work/w.txt ~/proj/w.txt", dataPath="sets", workPath="proj"
    )
    assert log.splitlines()[:3] == ["A", "W", "W"]


def test_a_work_path_missing_on_the_nfs_leaves_the_pod_creating(
    dlts: DltsEmulator, client: httpx.Client
) -> None:
    job_id = submit(client, dlts, "true", workPath="no/such/dir")
    poll(client, dlts, job_id, "scheduling")
    for _ in range(3):
        dlts.step()
    detail = job(client, dlts, job_id)
    assert detail["jobStatus"] == "scheduling"
    assert detail["jobStatusDetail"][0]["message"] == "ContainerCreating"
    set_status(client, dlts, job_id, "killing")
    assert poll(client, dlts, job_id, "killed")[0][-1] == "killed"


def test_log_pages_of_100_lines_with_a_cursor(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id, _ = run_and_read(client, dlts, "seq 1 150")
    url = f"api/clusters/{dlts.cluster}/jobs/{job_id}/log"
    first = client.get(url).json()
    assert first["log"][job_id] == "".join(f"{i}\n" for i in range(1, 101))
    cursor = first["cursor"]
    assert [int(p) for p in cursor.split(".")]  # "<@timestamp ms>.<time_nsec>"
    second = client.get(url, params={**dlts.credentials, "cursor": cursor}).json()
    lines = second["log"][job_id].splitlines()
    assert lines[:50] == [str(i) for i in range(101, 151)] and lines[50].endswith(" : 0")
    end = client.get(url, params={**dlts.credentials, "cursor": second["cursor"]})
    assert (end.status_code, end.text) == (404, "Not Found")  # nothing more (yet)
    restart = client.get(url, params={**dlts.credentials, "cursor": "garbage"}).json()
    assert restart == first  # a cursor TryParseCursor cannot read is ignored
    assert client.get(url, params={**dlts.credentials, "cursor": "1.2.3"}).status_code == 404


def test_a_running_jobs_log_grows(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "echo one; while [ ! -e /work/go ]; do sleep 0.02; done; echo two")
    poll(client, dlts, job_id, "running")
    url = f"api/clusters/{dlts.cluster}/jobs/{job_id}/log"
    wait_for(lambda: client.get(url).status_code == 200, message="the first line")
    first = client.get(url).json()
    assert first["log"] == {job_id: "one\n"}
    (dlts.work_dir() / "go").touch()
    poll(client, dlts, job_id)
    rest = client.get(url, params={**dlts.credentials, "cursor": first["cursor"]}).json()["log"][job_id]
    assert rest.startswith("two\n")


def test_legacy_log_backend_returns_the_whole_text(tmp_path: Path) -> None:
    with (
        DltsEmulator(tmp_path / "nfs", log_backend="legacy") as dlts,
        httpx.Client(base_url=dlts.url, params=dlts.credentials) as client,
    ):
        job_id = submit(client, dlts, "seq 1 3")
        assert poll(client, dlts, job_id)[0][-1] == "finished"
        answer = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/log").json()
        assert answer["cursor"] is None and answer["log"].startswith("1\n2\n3\n")
        assert client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}").json()["log"] == answer["log"]


def test_endpoint_is_served_on_its_own_port(dlts: DltsEmulator, client: httpx.Client) -> None:
    pod_port = _free_port(40000, 49999)  # DLTS only exposes pod ports in this range
    server = f"python3 -m http.server {pod_port} --bind 127.0.0.1 --directory /work"
    job_id = submit(client, dlts, server)
    poll(client, dlts, job_id, "running")
    (dlts.work_dir() / "hello.txt").write_text("from the pod\n")
    url = f"api/clusters/{dlts.cluster}/jobs/{job_id}/endpoints"
    answer = client.post(url, json={"endpoints": [{"name": "nni-rest-server", "podPort": pod_port}]})
    assert answer.status_code == 200 and answer.json()[f"e-{job_id}-port-{pod_port}"]["status"] == "pending"
    wait_for(lambda: client.get(url).json()[0]["status"] == "running", message="the endpoint to run")
    (endpoint,) = client.get(url).json()
    assert (
        endpoint["podPort"] == pod_port
        and endpoint["port"] != pod_port
        and endpoint["name"] == "nni-rest-server"
    )
    wait_for(
        lambda: _get(f"http://{endpoint['nodeName']}:{endpoint['port']}/hello.txt") == "from the pod\n",
        message="the pod's server behind the node port",
    )
    set_status(client, dlts, job_id, "killing")
    poll(client, dlts, job_id, "killed")
    assert client.get(url).json()[0]["status"] == "stopped"


def _free_port(low: int, high: int) -> int:
    for port in random.sample(range(low, high + 1), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {low}-{high}")


def _get(url: str) -> str | None:
    try:
        return httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return None


def test_endpoint_requests_the_restapi_refuses_are_502(dlts: DltsEmulator, client: httpx.Client) -> None:
    job_id = submit(client, dlts, "sleep 300")
    url = f"api/clusters/{dlts.cluster}/jobs/{job_id}/endpoints"
    for endpoints in (
        [{"name": "x", "podPort": 8080}],
        [{"name": "a-very-long-port-name", "podPort": 40001}],
    ):
        answer = client.post(url, json={"endpoints": endpoints})
        assert (answer.status_code, answer.text) == (502, "Bad Gateway")
    answer = client.post(f"api/clusters/{dlts.cluster}/jobs/nope/endpoints", json={"endpoints": ["ssh"]})
    assert answer.status_code == 502
    answer = client.post(url, json={"endpoints": [{"name": "x", "podPort": "40001"}]})
    assert answer.status_code == 400
    assert answer.text == (
        ".endpoints[0].podPort should be number\n"
        ".endpoints[0] should be equal to one of the allowed values\n"
        ".endpoints[0] should match exactly one schema in oneOf"
    )
    assert client.get(f"api/clusters/{dlts.cluster}/jobs/nope/endpoints").json() == []
    set_status(client, dlts, job_id, "killing")


def test_job_mountpoints_on_the_clusters_export(dlts: DltsEmulator, client: httpx.Client) -> None:
    spec = dlts.config.clusters[0]
    (dlts.data_dir() / "shared").mkdir()
    (dlts.data_dir() / "shared" / "s.txt").write_text("shared\n")
    target = f"/mnt/dlts-emulator-test-{uuid.uuid4().hex[:8]}"
    mountpoints = [
        {
            "name": "shared",
            "mountPath": target,
            "mountType": "nfs",
            "server": spec.nfs_server,
            "path": f"{spec.nfs_path}/storage/shared",
        },
        {"name": "broken"},  # no mountPath: make_mountpoint's result is invalid and skipped
        {
            "name": "data2",
            "mountPath": "/data",
            "mountType": "nfs",
            "server": spec.nfs_server,
            "path": f"{spec.nfs_path}/storage/shared",
        },  # /data is taken: a duplicate mount path is dropped
    ]
    _, log = run_and_read(client, dlts, f"cat {target}/s.txt; ls /data", mountpoints=mountpoints)
    assert log.splitlines()[:2] == ["shared", "shared"]  # /data is still the data path (holding "shared/")
    host_path = [{"name": "h", "mountPath": "/mnt/h", "mountType": "hostPath", "hostPath": "/etc"}]
    job_id = submit(client, dlts, "true", mountpoints=host_path)
    assert poll(client, dlts, job_id)[0][-1] == "error"
    message = client.get(f"api/clusters/{dlts.cluster}/jobs/{job_id}/status").json()["message"]
    assert message.startswith("Cannot submit job!emulator: mountpoint ") and "not emulated" in message
