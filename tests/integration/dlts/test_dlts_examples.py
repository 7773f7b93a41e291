"""examples/dlts run to the end through the real ``trialfleet`` CLI against the DLTS emulator.

``config_dlts.yml`` is NNI's own DLTS example (v1), with only its dashboard URL filled in. It runs as NNI's DLTS
mode meant: the manager itself runs in the user's DLTS job — here a container of the same kind the emulator
runs jobs in, the user's NFS work path mounted at ``/work`` and ``/home/<alias>`` — so credentials come from
DLTS's job variables and the experiment directory is on the storage at the path trials see too.
``config.yml`` (v2) runs on this machine, with the storage mounted here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from tests.emulators.container import Container, Mount
from tests.emulators.dlts import DltsEmulator
from tests.integration.cli_harness import CONSOLE_SCRIPT, Cli, free_port

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dlts"
WORKTREE = str(Path(__file__).resolve().parents[3])
INSTALLED = "/opt/trialfleet-under-test"  # where the manager's job finds this trialfleet


def check_trials(trials: list[dict[str, Any]], count: int) -> None:
    assert [t["status"] for t in trials] == ["SUCCEEDED"] * count, trials
    for trial in trials:
        final = json.loads(json.loads(trial["finalMetricData"][0]["data"]))  # NNI: the JSON of nni.dump()
        assert final["default"] > 0.5, trial


def in_job(dlts: DltsEmulator, cwd: str, *args: str, timeout: float = 300) -> str:
    """``trialfleet <args>`` in a container that sees the user's storage as DLTS jobs do, with the variables
    DLTS gives a job; its output."""
    alias = dlts.work_dir().name
    home = f"/home/{alias}"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": home,
        "PYTHONPATH": INSTALLED,
        "TRIALFLEET_HOME": f"{home}/.trialfleet",
        "DLWS_USER_EMAIL": dlts.email,
        "DLTS_JOB_TOKEN": dlts.password,
        "DLWS_VC_NAME": dlts.team,
    }
    output = dlts.storage / "manager-job.log"
    output.unlink(missing_ok=True)
    # the job's image has this trialfleet installed (it lives under /work on this machine, hidden by the mount)
    mounts = [Mount(Path(WORKTREE), INSTALLED, read_only=True)]
    mounts += [Mount(dlts.work_dir(), "/work"), Mount(dlts.work_dir(), home)]
    job = Container([str(CONSOLE_SCRIPT), *args], env=env, stdout=output, mounts=mounts, cwd=cwd)
    job.start()
    deadline = time.monotonic() + timeout
    while job.poll() is None:
        assert time.monotonic() < deadline, f"trialfleet {args} still runs: {output.read_text()}"
        time.sleep(0.1)
    text = output.read_text()
    assert job.poll() == 0, f"trialfleet {' '.join(args)} failed:\n{text}"
    return text


def test_nnis_v1_example_runs_in_a_dlts_job(dlts: DltsEmulator) -> None:
    shutil.copytree(EXAMPLE, dlts.work_dir() / "dlts-example")
    config = dlts.work_dir() / "dlts-example" / "config_dlts.yml"
    text = config.read_text()
    config.write_text(re.sub(r"dashboard: .*", f"dashboard: {dlts.url}", text))
    out = in_job(
        dlts,
        "/work/dlts-example",
        "create",
        "--config",
        "config_dlts.yml",
        "--foreground",
        "--port",
        str(free_port()),
    )
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    trials = json.loads(in_job(dlts, "/work", "trial", "ls", experiment_id, "--json"))
    check_trials(trials, 10)
    jobs = dlts.jobs()
    assert sorted(job["jobParams"]["jobName"] for job in jobs) == sorted(
        f"nni_exp_{experiment_id}_trial_{t['trialJobId']}" for t in trials
    )
    assert {job["jobParams"]["resourcegpu"] for job in jobs} == {1}
    # the experiment lives in the user's home on the storage, where trials found it
    assert (dlts.work_dir() / "trialfleet-experiments" / experiment_id / "trials").is_dir()


def test_the_v2_example_runs_with_the_storage_mounted_here(tmp_path: Path, dlts: DltsEmulator) -> None:
    code = tmp_path / "example"
    shutil.copytree(EXAMPLE, code)
    data = yaml.safe_load((code / "config.yml").read_text())
    data["trainingService"].update(
        dashboard=dlts.url,
        team=dlts.team,
        email=dlts.email,
        password=dlts.password,
        localStorageMountPoint=str(dlts.work_dir()),
    )
    data.update(maxTrialNumber=4, experimentWorkingDirectory=str(tmp_path / "experiments"))
    (code / "config.yml").write_text(yaml.safe_dump(data))
    cli = Cli.in_dir(tmp_path)
    cli.env["PYTHONPATH"] = os.environ.get("PYTHONPATH", WORKTREE)
    out = cli.ok("create", "--config", str(code / "config.yml"), "--foreground", "--port", str(free_port()))
    experiment_id = re.search(r"Experiment ID: (\w+)", out).group(1)  # type: ignore[union-attr]
    trials = cli.json("trial", "ls", experiment_id, "--json")
    check_trials(trials, 4)
    assert (dlts.work_dir() / experiment_id / "code").is_dir()
    # the experiment has ended: its trials' files are read where this machine sees the storage, not at the
    # path the job's container had
    trial_id = trials[0]["trialJobId"]
    trial_dir = next((dlts.work_dir() / experiment_id / "trials").glob(f"{trial_id}*"))
    (trial_dir / "trial.stdout").write_text("epoch 1\nepoch 2\n")  # the example's trial prints nothing
    shown = cli.ok("log", "trial", experiment_id, "-T", trial_id, "--stdout")
    assert shown.endswith("\nepoch 1\nepoch 2\n"), shown
