"""The Python API (NNI's Experiment) driving real manager processes."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trialfleet import Experiment, RunMode
from trialfleet.errors import ConfigError, DirectoryError, ExperimentStateError, ListenError, PortInUseError
from trialfleet.storage import manifest

TRIAL = """
import nni
params = nni.get_next_parameter()
nni.report_intermediate_result(params["x"] / 2)
nni.report_final_result({"default": params["x"], "half": params["x"] / 2})
"""


#: the API's own parameter, named where the command line would name --port
PORT_PARAMETER = "the port parameter of Experiment.run(port=...) or .start(port=...)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def code_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRIALFLEET_HOME", str(tmp_path / "home"))
    code = tmp_path / "code"
    code.mkdir()
    (code / "trial.py").write_text(textwrap.dedent(TRIAL))
    return code


def nni_style_experiment(code: Path) -> Experiment:
    """Written the way NNI's documentation writes it."""
    experiment = Experiment("local")
    experiment.config.trial_command = f"{sys.executable} trial.py"
    experiment.config.trial_code_directory = code
    experiment.config.search_space = {"x": {"_type": "uniform", "_value": [0, 1]}}
    experiment.config.tuner.name = "Random"
    experiment.config.tuner.class_args["optimize_mode"] = "maximize"
    experiment.config.max_trial_number = 4
    experiment.config.trial_concurrency = 2
    experiment.config.experiment_working_directory = code.parent / "experiments"
    return experiment


@pytest.mark.slow
def test_run_query_update_stop_resume_view(code_dir: Path) -> None:
    experiment = nni_style_experiment(code_dir)
    port = free_port()
    assert experiment.run(port) is True
    assert experiment.id is not None and experiment.get_status() == "DONE"

    jobs = experiment.list_trial_jobs()
    assert len(jobs) == 4 and {job.status for job in jobs} == {"SUCCEEDED"}
    job = experiment.get_trial_job(jobs[0].trialJobId)
    assert job.finalMetricData[0].data["default"] == job.hyperParameters[0].parameters["x"]
    results = experiment.export_data()
    assert {r.trialJobId for r in results} == {j.trialJobId for j in jobs}
    assert all(r.value["half"] == pytest.approx(r.parameter["x"] / 2) for r in results)
    metrics = experiment.get_job_metrics(job.trialJobId)
    assert [m.type for m in metrics[job.trialJobId]] == ["PERIODICAL", "FINAL"]
    assert experiment.get_job_statistics() == [{"trialJobStatus": "SUCCEEDED", "trialJobNumber": 4}]
    assert experiment.get_experiment_metadata(experiment.id)["platform"] == "local"
    assert experiment.get_experiment_profile()["params"]["maxTrialNumber"] == 4

    attached = Experiment.connect(port)
    assert attached.id == experiment.id
    attached.update_max_trial_number(6)
    assert experiment._wait_completion() is True
    assert len(experiment.list_trial_jobs()) == 6

    experiment.stop()
    assert experiment.port is None
    assert experiment.get_status() == "STOPPED"  # now read from the database
    assert len(experiment.export_data()) == 6

    resumed = Experiment.resume(experiment.id, free_port(), wait_completion=False)
    assert resumed.get_status() in ("RUNNING", "DONE", "NO_MORE_TRIAL")
    resumed.stop()

    viewer = Experiment.view(experiment.id, free_port(), non_blocking=True)
    assert viewer.get_status() == "VIEWED"
    with pytest.raises(ExperimentStateError, match="read-only"):
        viewer.kill_trial_job(jobs[0].trialJobId)
    viewer.stop()
    assert manifest.entries()[experiment.id]["status"] == "STOPPED"


@pytest.mark.slow
def test_context_manager_stops_the_manager(code_dir: Path) -> None:
    with nni_style_experiment(code_dir) as experiment:
        experiment.start(free_port(), run_mode=RunMode.Detach)
        assert experiment.get_status() in ("INITIALIZED", "RUNNING", "NO_MORE_TRIAL", "DONE")
    assert manifest.entries()[str(experiment.id)].get("port") is None


def test_invalid_draft_names_every_problem_and_creates_nothing(code_dir: Path) -> None:
    experiment = Experiment("local")
    experiment.config.trial_concurrency = "two"
    experiment.config.experiment_working_directory = code_dir.parent / "experiments"
    with pytest.raises(ConfigError) as caught:
        experiment.start(free_port())
    message = str(caught.value)
    # keys are named as the script wrote them
    assert "trial_concurrency" in message and "trialCommand" in message and "tuner.name" in message
    assert manifest.entries() == {}
    assert not (code_dir.parent / "experiments").exists()


@pytest.mark.parametrize(
    ("port", "host", "message"),
    [
        (70000, "127.0.0.1", f"port 70000 is not a TCP port: expected 1 to 65535; check {PORT_PARAMETER}"),
        (-1, "127.0.0.1", f"port -1 is not a TCP port: expected 1 to 65535; check {PORT_PARAMETER}"),
        (None, "192.0.2.1", "cannot listen on '192.0.2.1': 192.0.2.1 is not an address of this machine ("),
        (
            None,
            "no-such-host.invalid",
            "cannot listen on 'no-such-host.invalid': the host name does not resolve",
        ),
    ],
)
def test_a_port_or_host_it_cannot_listen_on_creates_nothing(
    code_dir: Path, port: int | None, host: str, message: str
) -> None:
    experiment = nni_style_experiment(code_dir)
    experiment.host = host
    try:
        with pytest.raises(ListenError) as caught:
            experiment.start(free_port() if port is None else port)
    finally:
        experiment.stop()
    assert message in str(caught.value)
    assert manifest.entries() == {}
    assert not (code_dir.parent / "experiments").exists()


def test_busy_port_creates_nothing(code_dir: Path) -> None:
    experiment = nni_style_experiment(code_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(PortInUseError) as caught:
            experiment.start(taken.getsockname()[1])
    assert f"choose another with {PORT_PARAMETER}" in str(caught.value) and "--port" not in str(caught.value)
    assert manifest.entries() == {}


def test_assessor_and_advisor_are_ready_to_fill_as_in_nni(code_dir: Path) -> None:
    """NNI's docs write ``config.assessor.name = 'Medianstop'`` on a fresh config; untouched ones are left out."""
    experiment = nni_style_experiment(code_dir)
    assert experiment.config.build().assessor is None
    experiment.config.assessor.name = "Medianstop"
    experiment.config.assessor.class_args["start_step"] = 3
    built = experiment.config.build()
    assert built.assessor is not None
    assert (built.assessor.name, built.assessor.class_args) == ("Medianstop", {"start_step": 3})

    advised = Experiment("local")
    advised.config.trial_command = "python3 trial.py"
    advised.config.trial_code_directory = code_dir
    advised.config.search_space = {"x": {"_type": "uniform", "_value": [0, 1]}}
    advised.config.trial_concurrency = 1
    advised.config.advisor.name = "Hyperband"
    assert advised.config.build().tuner.name == "Hyperband"  # NNI moves an advisor into tuner too


FOREGROUND_SCRIPT = """
import sys, time
from trialfleet import Experiment, RunMode
experiment = Experiment("local")
experiment.config.trial_command = f"{sys.executable} trial.py"
experiment.config.trial_code_directory = sys.argv[1]
experiment.config.search_space = {"x": {"_type": "uniform", "_value": [0, 1]}}
experiment.config.tuner.name = "Random"
experiment.config.max_trial_number = 1
experiment.config.trial_concurrency = 1
experiment.config.experiment_working_directory = sys.argv[2]
experiment.start(int(sys.argv[3]), run_mode=RunMode.Foreground)
while experiment.get_status() != "DONE":
    time.sleep(0.1)
print(experiment.id)
"""


@pytest.mark.slow
def test_foreground_mode_copies_the_whole_manager_log_and_stops_at_exit(code_dir: Path) -> None:
    script = code_dir.parent / "foreground.py"
    script.write_text(FOREGROUND_SCRIPT)
    workdir = code_dir.parent / "experiments"
    port = free_port()
    run = subprocess.run(
        [sys.executable, str(script), str(code_dir), str(workdir), str(port)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    experiment_id = run.stdout.splitlines()[-3]
    # NNI's Experiment prints its life cycle on stdout: "[date] message"
    said = [line.partition("] ")[2] for line in run.stdout.splitlines() if line.startswith("[")]
    assert said == [
        f"Creating experiment, Experiment ID: {experiment_id}",
        "Starting web server...",
        "Setting up...",
        f"Web portal URLs: http://127.0.0.1:{port}",
        "Stopping experiment, please wait...",
        "Experiment stopped.",
    ]
    log = (workdir / experiment_id / "log" / "manager.log").read_text()
    assert run.stderr.endswith(log) and log.rstrip().endswith("Experiment stopped.")  # up to the last line
    assert manifest.entries()[experiment_id].get("port") is None  # stopped when the interpreter exited


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "", "x" * 33, "spaced id", "ünï"])
def test_experiment_ids_follow_nni_rule(code_dir: Path, bad_id: str) -> None:
    experiment = nni_style_experiment(code_dir)
    experiment.id = bad_id
    with pytest.raises(ConfigError, match="1 to 32 letters, digits"):
        experiment.start(free_port())
    assert manifest.entries() == {}
    assert not (code_dir.parent / "experiments").exists() and not (code_dir.parent / "escape").exists()


@pytest.mark.slow
def test_a_chosen_experiment_id_is_kept(code_dir: Path) -> None:
    with nni_style_experiment(code_dir) as experiment:
        experiment.id = "My_run-2"
        experiment.start(free_port())
        assert experiment.get_experiment_profile()["id"] == "My_run-2"
    assert (code_dir.parent / "experiments" / "My_run-2" / "db").is_dir()


def test_an_unwritable_home_creates_nothing(code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = code_dir.parent / "home-file"
    home.write_text("not a directory")
    monkeypatch.setenv("TRIALFLEET_HOME", str(home))
    with pytest.raises(DirectoryError, match=f"TRIALFLEET_HOME {home}: it is not a directory"):
        nni_style_experiment(code_dir).start(free_port())
    assert not (code_dir.parent / "experiments").exists()
