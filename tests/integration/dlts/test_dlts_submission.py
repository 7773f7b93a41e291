"""What the DLTS service submits for a trial, checked against golden files, hostile values included.

The body is read back from the emulator's request log (what the dashboard received), the launch script and
``command.json`` from the trial directory on the storage. Regenerate the golden files after an intended change
with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/integration/dlts/test_dlts_submission.py

and review the diff. The hostile case is run to its end in the emulator's container, to show that every value
reaches the trial unchanged and nothing in it is executed.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from dlts_helpers import dlts_config

from tests.emulators.dlts import DltsEmulator
from trialfleet.status import TrialStatus
from trialfleet.testing import make_context, poll_until
from trialfleet.training_services.dlts import DltsTrainingService
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.spec import Submitted, TrialSpec

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) `touch pwned` ;|&<> %j \\n ünï ✓\nnew line"

CASES: dict[str, dict[str, Any]] = {
    "minimal": {"options": {}, "spec": {}},
    "gpus_and_attempt": {
        "options": {"gpuType": "V100", "preemptionAllowed": True, "image": "registry.example/nni:2.0"},
        "spec": {"gpu_number": 2, "attempt": 1},
    },
    "hostile": {
        "options": {},
        "spec": {"gpu_number": 0, "env": {"HOSTILE_VALUE": HOSTILE}},
        "command": f'python3 echo.py {shlex.quote(HOSTILE)} "$HOSTILE_VALUE" `echo ok` $(echo ok)',
        "parameters": {"text": HOSTILE, "n": 1.5},
    },
}

ECHO_TRIAL = """
import json, os, sys
with open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")) as f:
    parameters = json.load(f)["parameters"]
names = ("HOSTILE_VALUE", "NNI_PLATFORM", "NNI_CODE_DIR", "CUDA_VISIBLE_DEVICES", "DLTS_JOB_ID")
out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "parameters": parameters,
       "env": {name: os.environ.get(name) for name in names}}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
"""


async def submit_case(
    tmp_path: Path, dlts: DltsEmulator, case: dict[str, Any]
) -> tuple[DltsTrainingService, Submitted]:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "echo.py").write_text(ECHO_TRIAL)
    context = make_context(tmp_path / "experiment", dlts_config(dlts, **case["options"]), "golden")
    service = DltsTrainingService(context)
    await service.start()
    record = {
        "parameter_id": 3,
        "parameter_source": "algorithm",
        "parameters": case.get("parameters", {"x": 1}),
    }
    command = case.get("command", "python3 echo.py")
    spec = TrialSpec("Tr1al", 5, command, code_dir, json.dumps(record), **case["spec"])
    submitted = await service.submit(spec)
    assert isinstance(submitted, Submitted)
    return service, submitted


def rendered(
    tmp_path: Path, dlts: DltsEmulator, service: DltsTrainingService, submitted: Submitted
) -> dict[str, str]:
    (post,) = [r for r in dlts.requests if r["method"] == "POST" and r["path"].endswith("/jobs")]
    trial_dir = dlts.work_dir() / Path(submitted.handle["trial_dir"]).relative_to("/work")
    files = {
        "body.json": json.dumps(post["json"], indent=1, ensure_ascii=False) + "\n",
        "dlts.sh": (trial_dir / "dlts.sh").read_text(),
        "command.json": json.dumps(json.loads((trial_dir / "command.json").read_text()), indent=1) + "\n",
        "parameter.cfg": (trial_dir / "parameter.cfg").read_text(),
    }
    version = Path(service.storage.layout.directory).name
    copy = code_copy_name((tmp_path / "code").resolve())  # named after the test's temp directory
    return {name: text.replace(version, "<version>").replace(copy, "<code>") for name, text in files.items()}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_submission_matches_the_golden_files(tmp_path: Path, dlts: DltsEmulator, name: str) -> None:
    service, submitted = await submit_case(tmp_path, dlts, CASES[name])
    try:
        files = rendered(tmp_path, dlts, service, submitted)
        for file_name, text in files.items():
            golden = GOLDEN / f"dlts_{name}" / file_name
            if REGENERATE:
                golden.parent.mkdir(parents=True, exist_ok=True)
                golden.write_text(text)
            assert text == golden.read_text(), f"{golden} differs (TRIALFLEET_REGEN_GOLDEN=1 to update)"
        post = next(r for r in dlts.requests if r["method"] == "POST")
        assert post["query"] == {"email": [dlts.email], "password": [dlts.password]}
    finally:
        await service.close()


async def test_hostile_values_reach_the_trial_unchanged(tmp_path: Path, dlts: DltsEmulator) -> None:
    service, submitted = await submit_case(tmp_path, dlts, CASES["hostile"])
    try:
        seen = await poll_until(service, lambda s: "Tr1al" in s.ended)
        assert seen.ended["Tr1al"].status == TrialStatus.SUCCEEDED, seen.ended
        echoed = json.loads(await service.read_trial_file("Tr1al", submitted.handle, "echo.json"))
    finally:
        await service.close()
    assert echoed["argv"] == [HOSTILE, HOSTILE, "ok", "ok"]
    assert echoed["parameters"] == {"text": HOSTILE, "n": 1.5}
    env = echoed["env"]
    assert env["HOSTILE_VALUE"] == HOSTILE and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["NNI_PLATFORM"] == "dlts" and env["DLTS_JOB_ID"] == submitted.handle["job_id"]
    assert echoed["cwd"] == env["NNI_CODE_DIR"] and env["NNI_CODE_DIR"].startswith("/work/golden/code/")
    assert list(tmp_path.rglob("pwned*")) == []
