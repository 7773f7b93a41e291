"""What the Slurm service submits for a trial, checked against golden files, hostile values included.

The service runs against stand-ins for Slurm's commands (``sbatch`` records its arguments and answers a job
id); the golden files hold the sbatch command line and the files written into the trial directory.
Regenerate them after an intended change with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/unit/training_services/test_slurm_script.py

and review the diff. The hostile case's script is also run with bash, as Slurm would on a node, to show that
every value reaches the trial unchanged and nothing in it is executed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from slurm_fake_commands import FakeSlurm
from test_keeper_spawner import wait_for

from trialfleet.errors import PlatformError
from trialfleet.testing import make_context
from trialfleet.training_services.base import ExperimentContext
from trialfleet.training_services.naming import nni_job_name as job_name
from trialfleet.training_services.slurm import SlurmConfig, SlurmTrainingService
from trialfleet.training_services.slurm.runner import LocalCommandRunner
from trialfleet.training_services.slurm.script import reserved_options
from trialfleet.training_services.spec import Submitted, TrialSpec

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) `touch pwned` ;|&<> %j \\n ünï ✓\nnew line"
SCONTROL_CONFIG = "AccountingStorageType   = accounting_storage/none\nClusterName = golden\n"

CASES: dict[str, dict[str, Any]] = {
    "minimal": {"options": {}, "spec": {}},
    "full": {
        "options": {
            "partition": "gpu",
            "account": "ml-lab",
            "qos": "normal",
            "time_limit": 5400,
            "cpus_per_trial": 4,
            "memory": 16384,
            "sbatch_options": ["--exclusive", "--constraint=a100"],
            "setup_script": "module load cuda/12.1\nsource /opt/conda/bin/activate nni\n",
            "python_path": "/opt/conda/envs/nni/bin",
        },
        "spec": {"gpu_number": 2},
    },
    "gpus_style_time_from_max_trial_duration": {
        "options": {"gpu_request_style": "gpus"},
        "max_trial_duration": 61,
        "spec": {"gpu_number": 1},
    },
    "hostile": {
        "shared": f"shared {HOSTILE}",
        "options": {
            "partition": HOSTILE,
            "account": HOSTILE,
            "qos": HOSTILE,
            "sbatch_options": [f"--constraint={HOSTILE}", "--mail-user=ü@example.org"],
            "setup_script": f"export FROM_SETUP={shlex.quote(HOSTILE)}\necho 'setup: $(not run)'\n",
            "python_path": f"/opt/{HOSTILE}/bin",
        },
        "spec": {"gpu_number": 0, "env": {"HOSTILE_VALUE": HOSTILE}},
        "command": f'python3 echo.py {shlex.quote(HOSTILE)} "$HOSTILE_VALUE" `echo ok` $(echo ok)',
        "parameters": {"text": HOSTILE, "n": 1.5},
    },
}

ECHO_TRIAL = """
import json, os, sys
with open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")) as f:
    parameters = json.load(f)["parameters"]
names = ("HOSTILE_VALUE", "FROM_SETUP", "NNI_PLATFORM", "NNI_CODE_DIR", "CUDA_VISIBLE_DEVICES", "PYTHONPATH")
out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "parameters": parameters,
       "env": {name: os.environ.get(name) for name in names}}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
"""


def context(
    shared: Path, options: dict[str, Any], max_trial_duration: int | None = None
) -> ExperimentContext:
    config = SlurmConfig(trial_command="unused", shared_directory=shared, **options)
    return make_context(shared / "experiment", config, "golden", max_trial_duration=max_trial_duration)


async def submit_case(
    tmp_path: Path, case: dict[str, Any]
) -> tuple[SlurmTrainingService, Submitted, FakeSlurm]:
    shared = tmp_path / case.get("shared", "shared")
    code_dir = shared / "code"
    code_dir.mkdir(parents=True)
    (code_dir / "echo.py").write_text(ECHO_TRIAL)
    fake = FakeSlurm(tmp_path, scontrol=SCONTROL_CONFIG, squeue="", sbatch="42;golden\n")
    ctx = context(shared, case["options"], case.get("max_trial_duration"))
    service = SlurmTrainingService(ctx, runner=LocalCommandRunner(fake.env))
    await service.start()
    record = {
        "parameter_id": 3,
        "parameter_source": "algorithm",
        "parameters": case.get("parameters", {"x": 1}),
    }
    spec = TrialSpec(
        "Tr1al", 5, case.get("command", "python3 echo.py"), code_dir, json.dumps(record), **case["spec"]
    )
    submitted = await service.submit(spec)
    assert isinstance(submitted, Submitted)
    return service, submitted, fake


def rendered(
    tmp_path: Path, service: SlurmTrainingService, submitted: Submitted, fake: FakeSlurm
) -> dict[str, str]:
    trial_dir = Path(submitted.handle["trial_dir"])
    (argv,) = fake.calls("sbatch")
    files = {
        "sbatch.argv.json": json.dumps(argv, indent=1, ensure_ascii=False) + "\n",
        "sbatch.sh": (trial_dir / "sbatch.sh").read_text(),
        "command.json": json.dumps(json.loads((trial_dir / "command.json").read_text()), indent=1) + "\n",
        "parameter.cfg": (trial_dir / "parameter.cfg").read_text(),
    }
    version = service.support_dir.name
    return {
        name: text.replace(str(tmp_path), "<tmp>").replace(version, "<version>")
        for name, text in files.items()
    }


@pytest.mark.parametrize("name", sorted(CASES))
async def test_submission_matches_the_golden_files(tmp_path: Path, name: str) -> None:
    service, submitted, fake = await submit_case(tmp_path, CASES[name])
    assert submitted.handle["job_id"] == "42" and not submitted.started
    check_golden(GOLDEN / f"slurm_{name}", rendered(tmp_path, service, submitted, fake))


def check_golden(directory: Path, files: dict[str, str]) -> None:
    if REGENERATE:
        directory.mkdir(parents=True, exist_ok=True)
        for file, text in files.items():
            (directory / file).write_text(text, encoding="utf-8")
    for file, text in files.items():
        golden = directory / file
        assert golden.exists(), f"{golden} is missing: regenerate with TRIALFLEET_REGEN_GOLDEN=1"
        assert text == golden.read_text(encoding="utf-8"), f"{golden} differs (TRIALFLEET_REGEN_GOLDEN=1)"


@pytest.mark.slow
async def test_the_hostile_script_runs_every_value_exactly_as_given(tmp_path: Path) -> None:
    case = CASES["hostile"]
    service, submitted, _ = await submit_case(tmp_path, case)
    trial_dir = Path(submitted.handle["trial_dir"])
    env = {**os.environ, "SLURM_JOB_ID": "42", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["/bin/bash", "sbatch.sh"], cwd=trial_dir, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads((trial_dir / "result.json").read_text())
    assert result["exit_code"] == 0, (trial_dir / "trial.stderr").read_text()
    echoed = json.loads((trial_dir / "echo.json").read_text())
    assert echoed["argv"] == [HOSTILE, HOSTILE, "ok", "ok"]
    assert echoed["parameters"] == case["parameters"]
    assert Path(echoed["cwd"]) == tmp_path / case["shared"] / "code"
    assert echoed["env"]["HOSTILE_VALUE"] == HOSTILE and echoed["env"]["FROM_SETUP"] == HOSTILE
    assert echoed["env"]["NNI_PLATFORM"] == "slurm" and echoed["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert echoed["env"]["PYTHONPATH"].split(":")[0] == str(service.support_dir / "nni-shim")
    assert (trial_dir / "slurm_job_id").read_text() == "42\n"
    assert list(tmp_path.rglob("pwned")) == []


async def test_sbatch_options_that_trialfleet_sets_itself_are_refused(tmp_path: Path) -> None:
    assert reserved_options(["--exclusive", "--job-name=x", "-o", "--output=y", "--chdir=/"]) == [
        "--job-name=x",
        "-o",
        "--output=y",
        "--chdir=/",
    ]
    fake = FakeSlurm(tmp_path, scontrol=SCONTROL_CONFIG)
    ctx = context(tmp_path / "shared", {"sbatch_options": ["--exclusive", "--export=NONE"]})
    with pytest.raises(PlatformError, match="--export=NONE"):
        await SlurmTrainingService(ctx, runner=LocalCommandRunner(fake.env)).start()


def test_job_names_only_take_ids_safe_everywhere() -> None:
    assert job_name("exp1", "tr_1.a-b") == "nni_exp_exp1_trial_tr_1.a-b"
    for bad in ("a b", "a\nb", "ü", "", "$(x)"):
        with pytest.raises(ValueError):
            job_name("exp", bad)


#: reuse mode: the worker job's sbatch line and script, and the trial's command.json with its own environment
REUSE_CASES: dict[str, dict[str, Any]] = {
    "full": {**CASES["full"], "options": {**CASES["full"]["options"], "reuse_mode": True}},
    "hostile": {**CASES["hostile"], "options": {**CASES["hostile"]["options"], "reuse_mode": True}},
}


def rendered_worker(
    tmp_path: Path, service: SlurmTrainingService, submitted: Submitted, fake: FakeSlurm
) -> dict[str, str]:
    trial_dir, worker_dir = Path(submitted.handle["trial_dir"]), Path(submitted.handle["worker_dir"])
    (argv,) = fake.calls("sbatch")
    files = {
        "sbatch.argv.json": json.dumps(argv, indent=1, ensure_ascii=False) + "\n",
        "sbatch.sh": (worker_dir / "sbatch.sh").read_text(),
        "command.json": json.dumps(json.loads((trial_dir / "command.json").read_text()), indent=1) + "\n",
        "assigned.json": json.dumps(json.loads((trial_dir / "assigned.json").read_text()), indent=1) + "\n",
        "inbox": "\n".join(sorted(p.name for p in (worker_dir / "inbox").iterdir())) + "\n",
    }
    version, worker = service.support_dir.name, submitted.handle["worker"]
    return {
        name: text.replace(str(tmp_path), "<tmp>").replace(version, "<version>").replace(worker, "<worker>")
        for name, text in files.items()
    }


@pytest.mark.parametrize("name", sorted(REUSE_CASES))
async def test_a_reuse_worker_matches_the_golden_files(tmp_path: Path, name: str) -> None:
    service, submitted, fake = await submit_case(tmp_path, REUSE_CASES[name])
    assert submitted.handle["job_id"] == "42" and not submitted.started
    check_golden(GOLDEN / f"slurm_reuse_{name}", rendered_worker(tmp_path, service, submitted, fake))


async def test_the_hostile_worker_script_runs_the_trial_with_every_value_as_given(tmp_path: Path) -> None:
    """The worker's script, run with bash as Slurm would, takes the trial from its inbox and runs it with the
    values of its command.json and of the job's setup; asked to stop, it exits."""
    case = REUSE_CASES["hostile"]
    service, submitted, _ = await submit_case(tmp_path, case)
    trial_dir, worker_dir = Path(submitted.handle["trial_dir"]), Path(submitted.handle["worker_dir"])
    env = {**os.environ, "SLURM_JOB_ID": "42", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    worker = subprocess.Popen(["/bin/bash", "sbatch.sh"], cwd=worker_dir, env=env, stderr=subprocess.PIPE)
    try:
        result = wait_for(trial_dir / "result.json")
        (worker_dir / "stop" / "now").touch()
        assert worker.wait(timeout=60) == 0
    finally:
        worker.kill()
        worker.wait()
    assert result["exit_code"] == 0, (trial_dir / "trial.stderr").read_text()
    echoed = json.loads((trial_dir / "echo.json").read_text())
    assert echoed["argv"] == [HOSTILE, HOSTILE, "ok", "ok"]
    assert echoed["env"]["HOSTILE_VALUE"] == HOSTILE and echoed["env"]["FROM_SETUP"] == HOSTILE
    assert echoed["env"]["NNI_PLATFORM"] == "slurm" and echoed["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert echoed["env"]["PYTHONPATH"].split(":")[0] == str(service.support_dir / "nni-shim")
    assert (worker_dir / "claimed" / trial_dir.name).exists()
    assert [p.name for p in (worker_dir / "inbox").iterdir() if not p.name.startswith(".")] == []
    assert json.loads((worker_dir / "ended.json").read_text())["reason"] == "released by the manager"
    assert list(tmp_path.rglob("pwned")) == []


