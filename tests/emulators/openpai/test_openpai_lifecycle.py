"""Jobs run from submit to their end: FC states seen through convertState, exit codes, retries, policies, STOP."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.emulators.openpai import OpenPAIEmulator
from tests.emulators.openpai.testing import protocol, read_log, submit, wait_for, watch

EVERY_STATE = [
    ("WAITING", "AttemptCreationPending"),
    ("WAITING", "AttemptCreationRequested"),
    ("WAITING", "AttemptPreparing"),
    ("RUNNING", "AttemptRunning"),
    ("RUNNING", "AttemptDeletionPending"),
    ("RUNNING", "AttemptDeletionRequested"),
    ("RUNNING", "AttemptDeleting"),
    ("RUNNING", "AttemptCompleted"),
]


def test_a_get_right_after_submit_sees_the_placeholder_then_every_state(
    pai: OpenPAIEmulator, client: httpx.Client
) -> None:
    pai.hold_until_seen()
    response = submit(client, protocol("ok", ["echo done"]))
    assert response.status_code == 202
    assert response.json() == {"status": 202, "message": "Update job ok for user alice successfully."}
    first = client.get("/jobs/alice~ok").json()
    assert first["jobStatus"]["state"] == "WAITING"
    assert first["jobStatus"]["subState"] == "AttemptCreationPending"
    assert "attemptId" not in first["jobStatus"] and "appId" not in first["jobStatus"]
    assert first["jobStatus"]["createdTime"] is None and first["taskRoles"] == {}
    seen, detail = watch(client, "alice~ok")
    assert [("WAITING", "AttemptCreationPending"), *seen] == [*EVERY_STATE, ("SUCCEEDED", "Completed")]
    status = detail["jobStatus"]
    assert status["attemptId"] == 0 and status["appExitCode"] == 0 and status["appExitType"] == "Succeeded"
    assert status["appExitSpec"]["phrase"] == "Succeeded"
    times = [status[k] for k in ("submissionTime", "createdTime", "launchedTime", "completedTime")]
    assert all(t % 1000 == 0 for t in times) and times == sorted(times)  # Kubernetes keeps whole seconds


def test_a_failing_command_fails_the_job_with_the_runtimes_exit_code(client: httpx.Client) -> None:
    submit(client, protocol("fails", ["echo about to fail", "exit 3"]))
    seen, detail = watch(client, "alice~fails")
    assert seen[-1] == ("FAILED", "Completed")
    status = detail["jobStatus"]
    assert status["appExitCode"] == 255  # no runtime pattern matches: PAIRuntimeUnknownFailed
    assert status["appExitSpec"]["phrase"] == "PAIRuntimeUnknownFailed"
    assert status["appExitType"] == "Failed"
    assert (
        status["appExitTriggerMessage"]
        == "FailedTaskCount 1 has reached MinFailedTaskCount 1 in the TaskRole"
    )
    assert status["appExitTriggerTaskRoleName"] == "main" and status["appExitTriggerTaskIndex"] == 0
    runtime = status["appExitMessages"]["runtime"]
    assert runtime["originUserExitCode"] == 3 and runtime["exitCode"] == 255 and runtime["name"] == "app"
    assert "about to fail" in runtime["errorLogs"]["user"]
    assert status["appExitDiagnostics"].startswith(
        "Pod failed: PodPattern unmatched:\ncontainers:\n  - name: init\n"
    )
    task = detail["taskRoles"]["main"]["taskStatuses"][0]
    assert task["taskState"] == "FAILED" and task["containerExitCode"] == 255


def test_commands_run_with_errexit_as_the_runtime_runs_them(client: httpx.Client) -> None:
    submit(client, protocol("errexit", ["echo before", "false", "echo after"]))
    _, detail = watch(client, "alice~errexit")
    assert detail["jobStatus"]["state"] == "FAILED"
    assert detail["jobStatus"]["appExitMessages"]["runtime"]["originUserExitCode"] == 1
    assert read_log(client, detail, "stdout") == "before\n"


def test_command_not_found_is_recognised_by_the_runtime(client: httpx.Client) -> None:
    submit(client, protocol("missing", ["no-such-command-here --flag"]))
    _, detail = watch(client, "alice~missing")
    status = detail["jobStatus"]
    assert status["appExitCode"] == 220 and status["appExitSpec"]["phrase"] == "UserCommandExitWithError"
    assert status["appExitMessages"]["runtime"]["matchedUserLogString"] == "command not found"


def test_an_exit_code_missing_from_the_table_falls_back_to_256s_spec(client: httpx.Client) -> None:
    submit(client, protocol("killed", ["kill -USR1 0"]))  # the whole container dies of SIGUSR1: 128 + 10
    _, detail = watch(client, "alice~killed")
    spec = detail["jobStatus"]["appExitSpec"]
    assert detail["jobStatus"]["appExitCode"] == 138
    assert spec["code"] == 138 and spec["phrase"] == "PAIRuntimeExitAbnormally"


def test_stop_goes_through_stopping_and_ends_the_whole_tree(
    pai: OpenPAIEmulator, client: httpx.Client, tmp_path: Path
) -> None:
    pid_file = tmp_path / "nfs" / "background.pid"
    submit(
        client,
        protocol(
            "stopme",
            ["sleep 300 & echo $! > /mnt/confignfs/background.pid", "sleep 300"],
            extras={"storages": [{"name": "confignfs"}]},
        ),
    )
    watch(client, "alice~stopme", until=("RUNNING",))
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())
    background = int(pid_file.read_text())
    assert _alive(background)
    pai.hold_until_seen()
    response = client.put("/jobs/alice~stopme/executionType", json={"value": "STOP"})
    assert response.status_code == 202
    assert response.json() == {"status": 202, "message": "Execute job alice~stopme successfully."}
    seen, detail = watch(client, "alice~stopme")
    assert ("STOPPING", "AttemptDeletionPending") in seen and seen[-1] == ("STOPPED", "Completed")
    status = detail["jobStatus"]
    assert status["executionType"] == "STOP" and status["appExitCode"] == -210
    assert status["appExitSpec"]["phrase"] == "StopFrameworkRequested"
    assert status["appExitDiagnostics"] == "User has requested to stop the Framework"
    assert detail["taskRoles"]["main"]["taskStatuses"][0]["containerExitCode"] == -220
    assert not _alive(background)


def test_job_retries_make_new_attempts(pai: OpenPAIEmulator, client: httpx.Client) -> None:
    pai.hold_until_seen()
    command = "if [ -e /mnt/confignfs/first ]; then exit 0; fi; touch /mnt/confignfs/first; exit 1"
    submit(
        client, protocol("retry", [command], jobRetryCount=1, extras={"storages": [{"name": "confignfs"}]})
    )
    seen, detail = watch(client, "alice~retry")
    failed_at = seen.index(("RUNNING", "AttemptCompleted"))
    assert seen[failed_at + 1] == ("WAITING", "AttemptCreationPending")  # attempt 1 starts over
    assert seen[-1] == ("SUCCEEDED", "Completed")
    status = detail["jobStatus"]
    assert status["attemptId"] == 1 and status["retries"] == 1
    assert status["retryDetails"] == {"user": 1, "platform": 0, "resource": 0}
    first = client.get("/jobs/alice~retry/attempts/0").json()["jobStatus"]
    assert first["attemptId"] == 0 and first["attemptState"] == "FAILED" and first["appExitCode"] == 255
    assert first["state"] == "SUCCEEDED"  # the job's state is always the latest attempt's
    missing = client.get("/jobs/alice~retry/attempts/2")
    assert missing.status_code == 404
    assert missing.json() == {"code": "NoJobError", "message": "JobAttemptId 2 is not found in alice~retry."}
    assert client.get("/jobs", params={"username": "alice"}).json()[0]["retries"] == 1


def test_task_retries_need_gang_allocation_off(client: httpx.Client) -> None:
    command = "if [ -e /mnt/confignfs/task ]; then exit 0; fi; touch /mnt/confignfs/task; exit 1"
    text = protocol(
        "taskretry", [command], extras={"gangAllocation": False, "storages": [{"name": "confignfs"}]}
    )
    submit(client, text.replace("    instances: 1\n", "    instances: 1\n    taskRetryCount: 1\n"))
    _, detail = watch(client, "alice~taskretry")
    assert detail["jobStatus"]["state"] == "SUCCEEDED" and detail["jobStatus"]["retries"] == 0
    task = detail["taskRoles"]["main"]["taskStatuses"][0]
    assert task["retries"] == 1 and task["attemptId"] == 1
    attempts = client.get("/jobs/alice~taskretry/attempts/0/taskRoles/main/taskIndex/0/attempts").json()
    assert [(a["attemptId"], a["attemptState"], a["containerExitCode"]) for a in attempts["attempts"]] == [
        (1, "SUCCEEDED", 0),
        (0, "FAILED", 255),
    ]
    assert (
        attempts["username"] == "alice" and attempts["jobName"] == "taskretry" and attempts["taskIndex"] == 0
    )


def test_min_succeeded_instances_ends_the_others(client: httpx.Client) -> None:
    command = 'if [ "$PAI_TASK_INDEX" = 0 ]; then exit 0; fi; sleep 300'
    text = protocol("first", [command], instances=3)
    submit(
        client,
        text.replace("    instances: 3\n", "    instances: 3\n    completion: {minSucceededInstances: 1}\n"),
    )
    _, detail = watch(client, "alice~first")
    status = detail["jobStatus"]
    assert status["state"] == "SUCCEEDED" and status["appExitCode"] == 0
    assert (
        status["appExitTriggerMessage"]
        == "SucceededTaskCount 1 has reached MinSucceededTaskCount 1 in the TaskRole"
    )
    codes = [t["containerExitCode"] for t in detail["taskRoles"]["main"]["taskStatuses"]]
    assert codes == [0, -220, -220]


def test_min_failed_instances(client: httpx.Client) -> None:
    command = 'if [ "$PAI_TASK_INDEX" = 2 ]; then sleep 300; fi; exit 1'
    text = protocol("twofail", [command], instances=3)
    submit(
        client,
        text.replace("    instances: 3\n", "    instances: 3\n    completion: {minFailedInstances: 2}\n"),
    )
    _, detail = watch(client, "alice~twofail")
    status = detail["jobStatus"]
    assert status["state"] == "FAILED"
    assert (
        status["appExitTriggerMessage"]
        == "FailedTaskCount 2 has reached MinFailedTaskCount 2 in the TaskRole"
    )
    assert [t["containerExitCode"] for t in detail["taskRoles"]["main"]["taskStatuses"]][2] == -220


def test_min_failed_instances_minus_one_succeeds_once_all_completed(client: httpx.Client) -> None:
    text = protocol("tolerant", ['exit "$PAI_TASK_INDEX"'], instances=2)
    completion = "    completion: {minFailedInstances: -1, minSucceededInstances: -1}\n"
    submit(client, text.replace("    instances: 2\n", "    instances: 2\n" + completion))
    _, detail = watch(client, "alice~tolerant")
    status = detail["jobStatus"]
    assert status["state"] == "SUCCEEDED" and status["appExitCode"] == 0
    assert status["appExitDiagnostics"].startswith("CompletedTaskCount 2 has reached TotalTaskCount 2")


def test_a_job_over_its_vc_quota_waits_for_resources(
    pai: OpenPAIEmulator, client: httpx.Client, tmp_path: Path
) -> None:
    pai.set_capacity("default", cpu=2, memory=8192, gpu=0)
    gate = tmp_path / "nfs" / "go"
    storages = {"storages": [{"name": "confignfs"}]}
    submit(
        client,
        protocol("big1", ["while [ ! -e /mnt/confignfs/go ]; do sleep 0.02; done"], cpu=2, extras=storages),
    )
    watch(client, "alice~big1", until=("RUNNING",))
    submit(client, protocol("big2", ["echo second"], cpu=2))
    wait_for(lambda: client.get("/jobs/alice~big2").json()["jobStatus"]["subState"] == "AttemptPreparing")
    vc = client.get("/virtual-clusters/default").json()
    assert vc["resourcesUsed"]["cpu"] == 2 and vc["resourcesTotal"]["cpu"] == 2
    assert client.get("/jobs/alice~big2").json()["jobStatus"]["state"] == "WAITING"
    assert not pai.job("alice~big2").attempt.tasks["main"][0].attempt.admitted  # type: ignore[union-attr]
    gate.touch()
    seen, _ = watch(client, "alice~big2")
    assert seen[-1] == ("SUCCEEDED", "Completed")
    assert client.get("/virtual-clusters/default").json()["resourcesUsed"]["cpu"] == 0


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
