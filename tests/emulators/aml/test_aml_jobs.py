"""Jobs really run: the uploaded snapshot, AML's environment, the state machine, logs, MLflow metrics, cancel."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.ai.ml import command
from azure.ai.ml.entities import Environment
from azure.ai.ml.exceptions import JobException

from tests.emulators.aml import AmlEmulator

from .conftest import wait_for

ENVIRONMENT = Environment(image="mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04")


def submit(ml_client: Any, shell: str, code: Path | None = None, **kwargs: Any) -> Any:
    kwargs.setdefault("compute", "cpu-cluster")
    job = command(command=shell, code=str(code) if code else None, environment=ENVIRONMENT, **kwargs)
    return ml_client.jobs.create_or_update(job)


def statuses_until_terminal(ml_client: Any, name: str, first: str | None = None) -> list[str]:
    seen: list[str] = [first] if first else []

    def poll() -> bool:
        reported = ml_client.jobs.get(name).status
        status = str(getattr(reported, "value", reported))  # the SDK hands back its JobStatus enum
        if not seen or seen[-1] != status:
            seen.append(status)
        return status in ("Completed", "Failed", "Canceled", "NotResponding", "Paused")

    wait_for(poll)
    return seen


def test_every_state_is_seen_by_a_polling_client(ml_client: Any) -> None:
    job = submit(ml_client, "true")
    assert statuses_until_terminal(ml_client, job.name, first=job.status) == [
        "NotStarted",
        "Starting",
        "Preparing",
        "Queued",
        "Running",
        "Finalizing",
        "Completed",
    ]


def test_provisioning_appears_when_the_cluster_scales_up(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(provisioning=True)
    job = submit(ml_client, "true")
    assert "Provisioning" in statuses_until_terminal(ml_client, job.name)


def test_the_command_runs_in_the_uploaded_snapshot_with_amls_environment(
    emulator: AmlEmulator, ml_client: Any, code_dir: Path
) -> None:
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    shell = f"python train.py ${{{{inputs.lr}}}} && cat data/table.csv && python -c '{dump}' > env.json"
    job = submit(
        ml_client,
        shell,
        code_dir,
        inputs={"lr": 0.25},
        environment_variables={"FOO": "bar"},
        experiment_name="exp1",
    )
    assert statuses_until_terminal(ml_client, job.name)[-1] == "Completed"
    state = next(s for s in emulator.job_states() if s["name"] == job.name)
    working = Path(state["workingDir"])
    environment = json.loads((working / "env.json").read_text())
    container_wd = environment["AZUREML_CR_EXECUTION_WORKING_DIR_PATH"]
    assert container_wd.startswith("/mnt/azureml/cr/j/") and container_wd.endswith("/exe/wd")
    assert environment["FOO"] == "bar"
    assert environment["AZUREML_RUN_ID"] == environment["MLFLOW_RUN_ID"] == job.name
    assert environment["AZUREML_ARM_SUBSCRIPTION"] == emulator.config.subscription_id
    assert environment["AZUREML_ARM_WORKSPACE_NAME"] == emulator.config.workspace_name
    assert environment["AZUREML_ARM_PROJECT_NAME"] == environment["MLFLOW_EXPERIMENT_NAME"] == "exp1"
    assert environment["MLFLOW_TRACKING_URI"] == emulator.mlflow_tracking_uri
    assert "MANAGER_SECRET" not in environment  # the container starts from a clean environment
    log = read_user_log(emulator, job.name)
    assert f"cwd {container_wd}" in log  # the snapshot is seen at the container's path, not the host's
    assert "args ['0.25']" in log and "FOO bar" in log and "a,b\n1,2" in log


def read_user_log(emulator: AmlEmulator, name: str) -> str:
    """The job's std_log.txt through run history's logFiles SAS URL, as a client reads it."""
    token = emulator.credential().get_token(f"{emulator.url}/.default").token
    url = f"{emulator.url}/history/v1.0{emulator.config.arm_id}/runs/{name}/details"
    details = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
    if "user_logs/std_log.txt" not in details["logFiles"]:
        return ""
    return requests.get(details["logFiles"]["user_logs/std_log.txt"], timeout=10).text


@pytest.fixture(autouse=True)
def manager_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANAGER_SECRET", "must not leak into jobs")


def test_a_failing_command_fails_the_job_with_the_exit_code_in_run_history(
    emulator: AmlEmulator, ml_client: Any
) -> None:
    job = submit(ml_client, "echo about to fail; exit 3")
    assert statuses_until_terminal(ml_client, job.name)[-2:] == ["Finalizing", "Failed"]
    token = emulator.credential().get_token(f"{emulator.url}/.default").token
    url = f"{emulator.url}/history/v1.0{emulator.config.arm_id}/runs/{job.name}/details"
    details = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
    assert details["status"] == "Failed"
    assert "exited with status code 3" in details["error"]["error"]["message"]
    with pytest.raises(JobException):
        ml_client.jobs.stream(job.name)


def test_logs_are_readable_while_the_job_runs(emulator: AmlEmulator, ml_client: Any, tmp_path: Path) -> None:
    release = tmp_path / "release"
    job = submit(
        ml_client, f"echo first line; while [ ! -e {release} ]; do sleep 0.05; done; echo second line"
    )
    wait_for(lambda: "first line" in read_user_log(emulator, job.name))
    assert ml_client.jobs.get(job.name).status == "Running"
    assert "second line" not in read_user_log(emulator, job.name)
    release.touch()
    assert statuses_until_terminal(ml_client, job.name)[-1] == "Completed"
    assert read_user_log(emulator, job.name).splitlines()[-1] == "second line"


def test_metrics_logged_with_mlflow_inside_the_job_are_read_back_in_step_order(
    emulator: AmlEmulator, ml_client: Any, tmp_path: Path
) -> None:
    source = tmp_path / "metrics"
    source.mkdir()
    (source / "report.py").write_text(
        "import mlflow\n"
        "for step in (2, 0, 1):\n"
        "    mlflow.log_metric('accuracy', step / 10, step=step)\n"
        "mlflow.log_metrics({'loss': 0.5}, step=3)\n"
    )
    job = submit(ml_client, "python report.py", source)
    assert statuses_until_terminal(ml_client, job.name)[-1] == "Completed", read_user_log(emulator, job.name)
    from mlflow.tracking import MlflowClient

    token = emulator.credential().get_token(f"{emulator.aml_resource_id}/.default").token
    os.environ["MLFLOW_TRACKING_TOKEN"] = token
    try:
        client = MlflowClient(tracking_uri=emulator.mlflow_tracking_uri)
        history = client.get_metric_history(job.name, "accuracy")
        run = client.get_run(job.name)
    finally:
        del os.environ["MLFLOW_TRACKING_TOKEN"]
    assert [(m.step, m.value) for m in history] == [(0, 0.0), (1, 0.1), (2, 0.2)]
    assert run.info.run_id == job.name and run.info.status == "FINISHED"
    assert run.data.metrics == {"accuracy": 0.2, "loss": 0.5}


def test_cancel_stops_the_whole_process_tree(emulator: AmlEmulator, ml_client: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    job = submit(ml_client, f"sleep 300 & echo $! > {pid_file}; wait")
    # states advance only once a client has seen them, so the wait polls like a client would
    wait_for(
        lambda: (
            ml_client.jobs.get(job.name).status == "Running"
            and pid_file.exists()
            and pid_file.read_text().strip()
        )
    )
    child = int(pid_file.read_text())
    ml_client.jobs.begin_cancel(job.name, polling_interval=0.05).result()
    assert ml_client.jobs.get(job.name).status == "Canceled"
    history = [s for s, _ in emulator.job(job.name).history]
    assert history[-2:] == ["CancelRequested", "Canceled"] and "Running" in history
    wait_for(lambda: not Path(f"/proc/{child}").exists() or " Z " in Path(f"/proc/{child}/stat").read_text())
    assert emulator.job(job.name).exit_code == 128 + 15


def test_cancel_before_the_job_runs_never_starts_it(
    emulator: AmlEmulator, ml_client: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    emulator.configure(holdStates=["Queued"])
    job = submit(ml_client, f"touch {marker}")
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Queued")
    ml_client.jobs.begin_cancel(job.name, polling_interval=0.05).result()
    assert ml_client.jobs.get(job.name).status == "Canceled"
    assert not marker.exists()


def test_mlflow_refuses_what_azure_ml_refuses(emulator: AmlEmulator, ml_client: Any) -> None:
    """The limits of ``mlflow_limits``: MLflow's of a request, Azure ML's of a run (50 tags of 1,000 characters)."""
    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException

    job = submit(ml_client, "true", tags={"a": "1", "b": "2", "c": "3"})
    token = emulator.credential().get_token(f"{emulator.aml_resource_id}/.default").token
    os.environ["MLFLOW_TRACKING_TOKEN"] = token
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=emulator.mlflow_tracking_uri)
        refused = []
        for attempt in (
            lambda: client.set_tag(job.name, "long", "v" * 1001),
            lambda: client.set_tag(job.name, "k" * 101, "v"),
            lambda: client.log_batch(job.name, tags=[RunTag(f"t{i}", "v") for i in range(101)]),
        ):
            with pytest.raises(MlflowException) as error:
                attempt()
            refused.append(error.value.error_code)
        client.log_batch(job.name, tags=[RunTag(f"t{i}", "v" * 1000) for i in range(50 - 3)])  # + the job's 3
        with pytest.raises(MlflowException, match="at most 50 tags"):
            client.set_tag(job.name, "one-more", "v")
        client.set_tag(job.name, "t0", "set again: still 50")
    finally:
        del os.environ["MLFLOW_TRACKING_TOKEN"]
    assert refused == ["INVALID_PARAMETER_VALUE"] * 3


def test_the_scheduling_latency_knob_keeps_every_job_queued(emulator: AmlEmulator, ml_client: Any) -> None:
    emulator.configure(queueLatency=3600)
    job = submit(ml_client, "true")
    wait_for(lambda: ml_client.jobs.get(job.name).status == "Queued")
    for _ in range(3):
        assert ml_client.jobs.get(job.name).status == "Queued"  # an hour in the queue has not passed
    emulator.configure(queueLatency=0)
    assert statuses_until_terminal(ml_client, job.name, "Queued")[-1] == "Completed"


def test_runs_made_through_mlflow_nest_under_a_job_and_obey_the_same_limits(
    emulator: AmlEmulator, ml_client: Any
) -> None:
    """MLflow's ``experiments/create`` and ``runs/create`` through the real ``MlflowClient``: a run of the job's
    experiment, nested under the job's run by ``mlflow.parentRunId``, with Azure ML's 50 tags of its own, ended by
    ``runs/update``; a run of an experiment that does not exist is refused."""
    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    job = submit(ml_client, "true")
    token = emulator.credential().get_token(f"{emulator.aml_resource_id}/.default").token
    os.environ["MLFLOW_TRACKING_TOKEN"] = token
    try:
        client = MlflowClient(tracking_uri=emulator.mlflow_tracking_uri)
        experiment = client.get_run(job.name).info.experiment_id
        with pytest.raises(MlflowException) as missing:
            client.create_run("not-an-experiment")
        made = client.create_experiment("made-through-mlflow")
        assert client.get_experiment_by_name("made-through-mlflow").experiment_id == made
        with pytest.raises(MlflowException, match="already exists"):
            client.create_experiment("made-through-mlflow")
        child = client.create_run(experiment, tags={"mlflow.parentRunId": job.name}, run_name="attempt")
        client.log_batch(child.info.run_id, tags=[RunTag(f"t{i}", "v" * 1000) for i in range(49)])
        with pytest.raises(MlflowException, match="at most 50 tags"):
            client.set_tag(child.info.run_id, "one-more", "v")
        client.set_terminated(child.info.run_id, "FINISHED")
        ended = client.get_run(child.info.run_id)
    finally:
        del os.environ["MLFLOW_TRACKING_TOKEN"]
    assert missing.value.error_code == "RESOURCE_DOES_NOT_EXIST"
    assert ended.data.tags["mlflow.parentRunId"] == job.name and ended.info.run_name == "attempt"
    assert ended.info.status == "FINISHED" and ended.info.end_time is not None
    assert ended.info.experiment_id == experiment and ended.info.run_id != job.name
