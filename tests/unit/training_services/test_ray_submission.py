"""What the Ray service submits for a trial, checked against golden files, hostile values included.

The golden files hold ``submit_job``'s keyword arguments (the working directory's path replaced by a
placeholder) and, apart for reading, the entrypoint. Regenerate them after an intended change with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/unit/training_services/test_ray_submission.py

and review the diff. The hostile case is also run: the package is unpacked as Ray unpacks a working directory,
and the entrypoint is run by ``sh -c`` there, as Ray's job supervisor runs it, to show that every value reaches
the trial unchanged, nothing in it is executed, and the job's log carries the trial directory back whole.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from trialfleet.training_services.ray.log_channel import LogMirror
from trialfleet.training_services.ray.package import build_package, shipped_paths
from trialfleet.training_services.ray.submission import Resources, job_request
from trialfleet.training_services.spec import TrialSpec
from trialfleet.training_services.trial_dir import KEEPER_PROTOCOL

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) `touch pwned` ;|&<> %j \\n ünï ✓\nnew line @trialfleet/1 {}"
WORKING_DIR = "<package>.zip"
RECORD = {"parameter_id": 3, "parameter_source": "algorithm", "parameters": {"x": 0.5}, "parameter_index": 0}

CASES: dict[str, dict[str, Any]] = {
    "minimal": {"resources": Resources(cpus=1), "spec": {}},
    "full": {
        "resources": Resources(
            cpus=2.5, gpus=2, memory_mb=4096, custom={"ssd": 1, "accelerator_type:A100": 0.5}
        ),
        "runtime_env": {"pip": ["torch==2.13.0"], "env_vars": {"OMP_NUM_THREADS": "2"}},
        "node_directory": "/scratch/trialfleet",
        "spec": {"gpu_number": 2, "attempt": 2, "sequence_id": 7},
    },
    "zero_gpus": {"resources": Resources(cpus=0.5), "spec": {"gpu_number": 0}},
    "hostile": {
        "resources": Resources(cpus=1, custom={"ssd": 1}),
        "runtime_env": {"env_vars": {"HOSTILE": HOSTILE}},
        "spec": {
            "command": f"python3 echo.py {shlex.quote(HOSTILE)}",
            "parameters": {"text": HOSTILE},
            "env": {"HOSTILE_VALUE": HOSTILE},
        },
    },
}


def spec_of(case: dict[str, Any], code_dir: Path = Path("/code")) -> TrialSpec:
    options = dict(case["spec"])
    record = dict(RECORD, parameters=options.pop("parameters", RECORD["parameters"]))
    return TrialSpec(
        trial_id="Ab3xY",
        sequence_id=options.pop("sequence_id", 0),
        command=options.pop("command", "python3 trial.py --lr 0.1"),
        code_dir=code_dir,
        parameter_record=json.dumps(record),
        **options,
    )


def request_of(case: dict[str, Any], working_dir: str = WORKING_DIR, code_dir: Path = Path("/code")):
    return job_request(
        "expGold1",
        spec_of(case, code_dir),
        working_dir=working_dir,
        paths=shipped_paths(),
        resources=case["resources"],
        runtime_env=case.get("runtime_env"),
        node_directory=case.get("node_directory"),
    )


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGENERATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; generate it with TRIALFLEET_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.mark.parametrize("name", sorted(CASES))
def test_submission_matches_golden_file(name: str) -> None:
    request = request_of(CASES[name])
    kwargs = request.kwargs()
    # the shipped files are named after their content: the golden file holds their role, not their digest
    text = json.dumps(kwargs, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    paths = shipped_paths()
    for path, role in ((paths.entry, "<entry.py>"),):
        text = text.replace(path, role)
    check_golden(f"ray_{name}.json", text)
    check_golden(f"ray_{name}.entrypoint", request.entrypoint.replace(paths.entry, "<entry.py>") + "\n")
    assert request.entrypoint.isascii()
    assert kwargs["runtime_env"]["working_dir"] == WORKING_DIR
    assert kwargs["metadata"] == {
        "trialfleet_experiment": "expGold1",
        "trialfleet_trial": "Ab3xY",
        "trialfleet_attempt": str(CASES[name]["spec"].get("attempt", 0)),
    }


ECHO = """
import json, os, sys
out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ["HOSTILE_VALUE"],
       "parameters": json.load(open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")))["parameters"],
       "dirs": [os.environ[k] for k in ("NNI_SYS_DIR", "NNI_OUTPUT_DIR", "NNI_CODE_DIR")],
       "trial": os.environ["NNI_TRIAL_JOB_ID"], "nni": __import__("nni").__file__,
       "job_env": os.environ["HOSTILE"], "channel": os.environ.get("NNI_TRIAL_COMMAND_CHANNEL")}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
print("done", flush=True)
"""


@pytest.mark.slow
def test_hostile_entrypoint_runs_exactly_as_given(tmp_path: Path) -> None:
    code_dir = tmp_path / "code 'q' $(x) ünï"
    code_dir.mkdir()
    (code_dir / "echo.py").write_text(ECHO)
    package = build_package(code_dir, tmp_path / "package.zip")
    working_dir = tmp_path / "working dir"  # as Ray unpacks a working directory zip
    with zipfile.ZipFile(package) as archive:
        archive.extractall(working_dir)
    case = dict(CASES["hostile"], node_directory=str(tmp_path / "nodes"))
    request = request_of(case, working_dir=str(package), code_dir=code_dir)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOSTILE": HOSTILE,  # the job's runtime_env sets it
        "NNI_TRIAL_COMMAND_CHANNEL": "ws://elsewhere",  # would switch a real nni's channel
    }
    job = subprocess.run(
        ["/bin/sh", "-c", request.entrypoint],
        cwd=working_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert job.returncode == 0, job.stderr
    mirror = tmp_path / "mirror"
    LogMirror(mirror).replay(job.stdout)
    echoed = json.loads((mirror / "echo.json").read_text())
    trial_dir = str(tmp_path / "nodes" / "expGold1" / "trials" / "Ab3xY")
    assert echoed["argv"] == [HOSTILE]
    assert echoed["env"] == HOSTILE and echoed["parameters"] == {"text": HOSTILE}
    assert echoed["cwd"] == str(working_dir) and echoed["dirs"] == [trial_dir, trial_dir, str(working_dir)]
    assert echoed["trial"] == "Ab3xY" and "/nni-shim/nni/" in echoed["nni"]
    assert (mirror / "trial.stdout").read_text() == "done\n"
    assert json.loads((mirror / "result.json").read_text())["exit_code"] == 0
    assert echoed["job_env"] == HOSTILE and echoed["channel"] is None
    # keeper protocol 2: command.json holds what the trial's environment changes in the job's, nothing else
    command = json.loads((Path(trial_dir) / "command.json").read_text())
    assert command["protocol"] == KEEPER_PROTOCOL and command["cwd"] == str(working_dir)
    assert command["env_unset"] == ["NNI_TRIAL_COMMAND_CHANNEL"]
    assert command["env"]["HOSTILE_VALUE"] == HOSTILE and command["env"]["NNI_SYS_DIR"] == trial_dir
    assert not {"HOSTILE", "PATH", "HOME"} & set(command["env"]), command["env"]
    assert not (mirror / "command.json").exists()  # private: never shipped back
    assert list(tmp_path.rglob("pwned*")) == []
