"""What a task's container gets (PAI_* variables, storages at their mount paths, rendered commands) and its logs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from tests.emulators.openpai import OpenPAIEmulator, Storage
from tests.emulators.openpai.testing import protocol, read_log, submit, wait_for, watch


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_every_instance_gets_the_pai_variables(
    client: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MANAGER_SECRET", "only on this machine")
    command = "env > /mnt/confignfs/env-$PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"
    text = protocol(
        "envjob",
        [command],
        role="Train_A",
        instances=2,
        cpu=2,
        memory_mb=2048,
        extras={"storages": [{"name": "confignfs"}]},
    )
    submit(client, text)
    _, detail = watch(client, "alice~envjob")
    assert detail["jobStatus"]["state"] == "SUCCEEDED"
    assert list(detail["taskRoles"]) == ["traina"]  # FrameworkController's name of the role
    tasks = detail["taskRoles"]["traina"]["taskStatuses"]
    for index in (0, 1):
        env = _env(tmp_path / "nfs" / f"env-{index}")
        assert env["PAI_JOB_NAME"] == "alice~envjob" and env["PAI_USER_NAME"] == "alice"
        assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "Train_A"
        assert env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == str(index) == env["PAI_TASK_INDEX"]
        assert env["PAI_TASK_ROLE_TASK_COUNT_Train_A"] == "2" and env["PAI_TASK_ROLE_LIST"] == "Train_A"
        assert env["PAI_RESOURCE_Train_A"] == "0,2,2048,0" and env["NVIDIA_VISIBLE_DEVICES"] == "none"
        assert (
            env["PAI_MIN_FAILED_TASK_COUNT_Train_A"] == "1"
            and env["PAI_MIN_SUCCEEDED_TASK_COUNT_Train_A"] == "2"
        )
        assert env["PAI_VIRTUAL_CLUSTER"] == "default" and env["FC_TASKROLE_NAME"] == "traina"
        assert env["FC_TASK_INDEX"] == str(index) and env["FC_POD_UID"] == tasks[index]["containerId"]
        for other in (0, 1):
            assert env[f"PAI_HOST_IP_traina_{other}"] == tasks[other]["containerIp"] == "127.0.0.1"
            assert env[f"PAI_PORT_LIST_traina_{other}_http"] == tasks[other]["containerPorts"]["http"]
        assert env["PAI_CONTAINER_SSH_PORT"] == tasks[index]["containerPorts"]["ssh"]
        assert env["PAI_TASK_ROLE_INSTANCES"] == "traina:0,traina:1"
        assert "MANAGER_SECRET" not in env and env["HOME"] == "/root"


def test_storages_are_mounted_at_their_container_paths(
    pai: OpenPAIEmulator, client: httpx.Client, tmp_path: Path
) -> None:
    private = tmp_path / "private"
    pai.config.storages.append(Storage("private", private, share=False))
    (tmp_path / "nfs" / "code.txt").write_text("from the team storage\n")
    commands = [
        "cat /mnt/confignfs/code.txt",
        "echo mine > /mnt/private-data/own.txt",
        "ls /mnt",
    ]
    storages = [{"name": "confignfs"}, {"name": "private", "mountPath": "/mnt/private-data"}]
    submit(client, protocol("mounts", commands, extras={"storages": storages}))
    _, detail = watch(client, "alice~mounts")
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail["jobStatus"]["appExitDiagnostics"]
    assert (private / "alice" / "own.txt").read_text() == "mine\n"  # a non-shared storage: subPath = user
    assert read_log(client, detail, "stdout").startswith("from the team storage\n")


def test_an_empty_storage_list_means_the_users_default_storages(client: httpx.Client, tmp_path: Path) -> None:
    submit(client, protocol("defaults", ["touch /mnt/confignfs/seen"], extras={"storages": []}))
    assert watch(client, "alice~defaults")[1]["jobStatus"]["state"] == "SUCCEEDED"
    assert (tmp_path / "nfs" / "seen").exists()


def test_the_deprecated_teamwise_storage_plugin_is_converted(client: httpx.Client, tmp_path: Path) -> None:
    plugin = {
        "com.microsoft.pai.runtimeplugin": [
            {"plugin": "teamwise_storage", "parameters": {"storageConfigNames": ["confignfs"]}}
        ]
    }
    submit(client, protocol("teamwise", ["touch /mnt/confignfs/teamwise"], extras=plugin))
    assert watch(client, "alice~teamwise")[1]["jobStatus"]["state"] == "SUCCEEDED"
    assert (tmp_path / "nfs" / "teamwise").exists()


def test_a_relative_mount_path_is_a_pod_creation_error(client: httpx.Client) -> None:
    submit(
        client,
        protocol("relative", ["true"], extras={"storages": [{"name": "confignfs", "mountPath": "mnt/x"}]}),
    )
    _, detail = watch(client, "alice~relative")
    status = detail["jobStatus"]
    assert status["state"] == "FAILED" and status["appExitCode"] == -200
    assert status["appExitSpec"]["phrase"] == "PodCreationPermanentError"
    assert status["appExitDiagnostics"].startswith("Failed to create Pod:")


def test_an_unknown_storage_is_not_found(client: httpx.Client) -> None:
    response = submit(client, protocol("nostorage", ["true"], extras={"storages": [{"name": "elsewhere"}]}))
    assert response.status_code == 404
    assert response.json() == {"code": "NoStorageError", "message": "Storage elsewhere is not found."}


def test_parameters_and_secrets_reach_the_command(client: httpx.Client) -> None:
    text = protocol(
        "rendered",
        ["echo lr=<% $parameters.lr %> key=<% $secrets.key %>"],
        parameters={"lr": 0.5},
        secrets={"key": "s3cret"},
    )
    submit(client, text)
    _, detail = watch(client, "alice~rendered")
    assert read_log(client, detail, "stdout") == "lr=0.5 key=s3cret\n"
    config = yaml.safe_load(client.get("/jobs/alice~rendered/config").text)
    assert config["secrets"] == "******" and config["parameters"] == {"lr": 0.5}


def test_logs_split_stdout_stderr_and_all_and_tail_the_last_16_kib(client: httpx.Client) -> None:
    commands = ["echo out", "echo err >&2", "python3 -c \"print('x' * 40000)\""]
    submit(client, protocol("logs", commands))
    _, detail = watch(client, "alice~logs")
    assert read_log(client, detail, "stderr") == "err\n"
    assert read_log(client, detail, "stdout") == "out\n" + "x" * 40000 + "\n"
    assert sorted(read_log(client, detail, "all").splitlines()) == sorted(["out", "err", "x" * 40000])
    task = detail["taskRoles"]["main"]["taskStatuses"][0]
    listing = client.get(task["containerLog"].removeprefix("/api/v2"), params={"tail-mode": "true"}).json()
    uri = next(loc["uri"] for loc in listing["locations"] if loc["name"] == "stdout")
    assert uri.endswith("&tail-mode=true") and uri.startswith(
        "/log-manager/127.0.0.1:9103/api/v1/logs/user-stdout?"
    )
    tail = httpx.get(str(client.base_url).split("/rest-server")[0] + uri)
    assert tail.status_code == 206 and tail.content == (b"out\n" + b"x" * 40000 + b"\n")[-16384:]


def test_log_urls_need_the_log_managers_token(client: httpx.Client) -> None:
    submit(client, protocol("tokenlog", ["echo hi"]))
    _, detail = watch(client, "alice~tokenlog")
    task = detail["taskRoles"]["main"]["taskStatuses"][0]
    uri = client.get(task["containerLog"].removeprefix("/api/v2")).json()["locations"][0]["uri"]
    base = str(client.base_url).split("/rest-server")[0]
    assert httpx.get(base + uri.split("&token=")[0]).status_code == 403


def test_a_task_without_a_pod_has_no_log(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    pai.set_capacity("default", cpu=0, memory=0, gpu=0)
    submit(client, protocol("nolog", ["true"]))
    wait_for(lambda: client.get("/jobs/alice~nolog").json()["jobStatus"]["subState"] == "AttemptPreparing")
    response = client.get("/jobs/alice~nolog/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs")
    assert response.status_code == 404
    assert response.json() == {"code": "NoTaskLogError", "message": "Log of task is not found."}
    missing = client.get("/jobs/alice~nothing/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs")
    assert missing.status_code == 500  # the controller turns every other error into this one
    assert missing.json() == {"code": "UnknownError", "message": "Failed to get log list"}
