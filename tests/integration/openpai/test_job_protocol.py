"""What the OpenPAI service submits for a trial, checked against golden files, hostile values included.

The service runs against the OpenPAI emulator: the golden files hold the job protocol it posted (which the
emulator checked with OpenPAI's own schema and rules) and the files it wrote into the trial directory on the
storage. Each job then really runs, and the trial reports what it was given. Regenerate the files after an
intended change with::

    TRIALFLEET_REGEN_GOLDEN=1 python -m pytest tests/integration/openpai/test_job_protocol.py

and review the diff.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shlex
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from openpai_helpers import FAST, submitted, trial_spec

from tests.emulators.openpai import ClusterConfig, OpenPAIEmulator, Storage, Timing, User, VirtualCluster
from tests.integration.cli_harness import free_port
from trialfleet.status import TrialStatus
from trialfleet.testing import make_context, poll_until
from trialfleet.training_services.mounted_storage import code_copy_name
from trialfleet.training_services.openpai import OpenpaiConfig, OpenpaiTrainingService
from trialfleet.training_services.openpai.protocol import protocol_text
from trialfleet.training_services.support import support_version

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("TRIALFLEET_REGEN_GOLDEN") == "1"
HOSTILE = "sp ace 'q' \"dq\" $(touch pwned) `touch pwned` ;|&<> %j \\n ünï ✓ {{x}} %>\nnew line"

ECHO_TRIAL = """
import json, os, sys
with open(os.path.join(os.environ["NNI_SYS_DIR"], "parameter.cfg")) as f:
    parameters = json.load(f)["parameters"]
names = ("HOSTILE_VALUE", "NNI_PLATFORM", "NNI_TRIAL_JOB_ID", "NNI_CODE_DIR", "CUDA_VISIBLE_DEVICES", "PAI_CURRENT_TASK_ROLE_NAME")
out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "parameters": parameters, "sys_dir": os.environ["NNI_SYS_DIR"],
       "env": {name: os.environ.get(name) for name in names}}
with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
    json.dump(out, f)
"""

CASES: dict[str, dict[str, Any]] = {
    "nni_default": {"block": {}, "spec": {"gpu_number": 0}},
    "full": {
        "block": {"virtualCluster": "vc_a", "dockerImage": "pytorch/pytorch:2.1.0", "trialCpuNumber": 4},
        "block_gpus": 2,
        "spec": {"gpu_number": 2, "attempt": 1},
    },
    "user_protocol": {
        "block": {
            "openpaiConfig": {
                "protocolVersion": 2,
                "name": "replaced",
                "type": "job",
                "description": "replaced too",
                "jobRetryCount": 2,
                "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "python:3.11"}],
                "taskRoles": {
                    "worker": {
                        "instances": 2,
                        "dockerImage": "img",
                        "resourcePerInstance": {"cpu": 2, "memoryMB": 2048, "gpu": 0},
                        "commands": ["python3 echo.py worker"],
                    },
                    "ps": {"commands": ["python3 echo.py ps"]},
                },
                "extras": {"storages": [{"name": "confignfs"}]},
            },
        },
        "spec": {"gpu_number": 0},
    },
    "relay": {"block": {"localStorageMountPoint": None}, "spec": {"gpu_number": 0}},
    "hostile": {
        "storage": f"nfs {HOSTILE}".replace("<%", "<"),
        "block": {"containerStorageMountPoint": f"/mnt/{HOSTILE}", "dockerImage": f"img:{HOSTILE}"},
        "spec": {"gpu_number": 0, "env": {"HOSTILE_VALUE": HOSTILE}},
        "command": f'python3 echo.py {shlex.quote(HOSTILE)} "$HOSTILE_VALUE" `echo ok` $(echo ok)',
        "parameters": {"text": HOSTILE, "n": 1.5},
    },
}


def emulator(tmp_path: Path, case: dict[str, Any]) -> OpenPAIEmulator:
    storage = case.get("storage", "confignfs")
    config = ClusterConfig(
        users=[User("admin", admin=True), User("alice", virtual_clusters=["default", "vc_a"])],
        virtual_clusters=[VirtualCluster("default"), VirtualCluster("vc_a")],
        storages=[Storage(storage, tmp_path / "nfs")],
        timing=Timing(delays=dict(FAST)),
    )
    (tmp_path / "nfs").mkdir()
    return OpenPAIEmulator(config, workdir=tmp_path / "cluster")


def block(pai: OpenPAIEmulator, case: dict[str, Any], code_dir: Path) -> dict[str, Any]:
    given = {**pai.nni_config("alice", case.get("storage", "confignfs")), "trialCommand": "unused"}
    given["trialCodeDirectory"] = str(code_dir)
    given |= {"trialCpuNumber": 1, "trialMemorySize": 512, "trialGpuNumber": case.get("block_gpus", 0)}
    given["reuseMode"] = False  # the job of one trial attempt (NNI's default, reuse, is test_reuse.py's)
    given.pop("containerStorageMountPoint")  # OpenPAI's default, /mnt/<storage>, unless the case sets one
    if case["block"].get("localStorageMountPoint", "") is None:  # the storage is not mounted here: the relay
        given |= {"relayPort": free_port()}
    return {key: value for key, value in (given | case["block"]).items() if value is not None}


async def run_case(tmp_path: Path, pai: OpenPAIEmulator, case: dict[str, Any]) -> tuple[dict[str, str], Path]:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "echo.py").write_text(ECHO_TRIAL)
    config = OpenpaiConfig.model_validate(block(pai, case, code_dir))
    service = OpenpaiTrainingService(make_context(tmp_path / "experiment", config, "golden"))
    await service.start()
    try:
        spec = trial_spec("Tr1al", case.get("command", "python3 echo.py"), code_dir, **case["spec"])
        if "parameters" in case:
            spec = type(spec)(
                **{
                    **spec.__dict__,
                    "parameter_record": json.dumps({"parameter_id": 3, "parameters": case["parameters"]}),
                }
            )
        handle = (await submitted(service, spec)).handle
        seen = await poll_until(service, lambda s: "Tr1al" in s.ended)
        assert seen.ended["Tr1al"].status is TrialStatus.SUCCEEDED, seen.ended["Tr1al"]
    finally:
        await service.close()
    (post,) = [r for r in pai.requests if r["method"] == "POST"]
    headers = {k.lower(): v for k, v in post["headers"].items()}
    assert headers["content-type"].startswith("text/yaml") and post["status"] == 202
    files = {"protocol.yml": post["body"]}
    trial_dir = Path(handle["trial_dir"])
    if config.local_storage_mount_point is None:
        files = relayed_files(post["body"], experiment_dir=tmp_path / "experiment")
        trial_dir = (
            tmp_path / "nfs" / "golden" / "trials" / "Tr1al"
        )  # the trial's own files stay on the cluster
    else:
        for name in sorted(p.name for p in trial_dir.iterdir() if p.name.startswith(FILES)):
            files[name] = (trial_dir / name).read_text()
    copy = code_copy_name(code_dir.resolve())
    replaced = {
        name: text.replace(str(tmp_path), "<tmp>")
        .replace(support_version(), "<version>")
        .replace(copy, "<code copy>")
        for name, text in files.items()
    }
    return replaced, trial_dir


FILES = ("command", "openpai-task", "parameter")


def relayed_files(body: str, experiment_dir: Path) -> dict[str, str]:
    """Without the storage mounted here the job carries its files: the protocol with its archive's place
    marked, the archive's listing, and the trial's own files in it (the relay's address and secret marked)."""
    protocol = yaml.safe_load(body)
    commands = protocol["taskRoles"]["taskrole"]["commands"]
    (encoded,) = re.findall(r"printf '%s' ([A-Za-z0-9+/=]+) \|", commands[1])
    commands[1] = commands[1].replace(encoded, "<archive>")
    files = {"protocol.yml": protocol_text(protocol)}  # its archive is a long line, folded in the text posted
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(encoded))) as tar:
        members = tar.getmembers()
        files["archive.txt"] = "".join(f"{m.name}{'/' if m.isdir() else ''}\n" for m in members)
        for member in members:
            name = member.name.rpartition("/")[2]
            extracted = tar.extractfile(member) if member.isfile() else None
            if member.name.startswith("trials/") and name.startswith(FILES) and extracted is not None:
                files[name] = extracted.read().decode()
    secret = (experiment_dir / "relay-secret").read_text().strip()
    command = json.loads(files["command.json"])
    command["relay"]["url"] = re.sub(r"//[^/]+/", "//<manager>:<relay port>/", command["relay"]["url"])
    files["command.json"] = json.dumps(command).replace(secret, "<secret>")
    return files


@pytest.mark.parametrize("name", sorted(CASES))
async def test_submission_matches_the_golden_files_and_runs(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    with emulator(tmp_path, case) as pai:
        files, trial_dir = await run_case(tmp_path, pai, case)
    directory = GOLDEN / name
    if REGENERATE:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.iterdir():
            stale.unlink()
        for file, text in files.items():
            (directory / file).write_text(text, encoding="utf-8")
    assert sorted(files) == sorted(p.name for p in directory.iterdir()), (
        "regenerate with TRIALFLEET_REGEN_GOLDEN=1"
    )
    for file, text in files.items():
        assert text == (directory / file).read_text(encoding="utf-8"), (
            f"{directory / file} differs (TRIALFLEET_REGEN_GOLDEN=1)"
        )
    yaml.safe_load(files["protocol.yml"])  # what was posted is YAML
    assert list(tmp_path.rglob("pwned")) == []
    check_echo(name, case, trial_dir)


def check_echo(name: str, case: dict[str, Any], trial_dir: Path) -> None:
    echoed = json.loads((trial_dir / "echo.json").read_text())
    mount = case["block"].get("containerStorageMountPoint", f"/mnt/{case.get('storage', 'confignfs')}")
    assert echoed["sys_dir"] == f"{mount}/golden/trials/{'Tr1al.1' if name == 'full' else 'Tr1al'}"
    assert echoed["cwd"] == echoed["env"]["NNI_CODE_DIR"] and echoed["cwd"].startswith(
        f"{mount}/golden/code/"
    )
    assert echoed["env"]["NNI_PLATFORM"] == "openpai" and echoed["env"]["NNI_TRIAL_JOB_ID"] == "Tr1al"
    assert echoed["env"]["CUDA_VISIBLE_DEVICES"] == ("" if case["spec"]["gpu_number"] == 0 else None)
    if name == "hostile":
        assert echoed["argv"] == [HOSTILE, HOSTILE, "ok", "ok"]
        assert echoed["parameters"] == case["parameters"] and echoed["env"]["HOSTILE_VALUE"] == HOSTILE
    if name == "user_protocol":  # every task ran its role's own command, the first one in the trial directory
        assert (echoed["argv"], echoed["env"]["PAI_CURRENT_TASK_ROLE_NAME"]) == (["worker"], "worker")
        for task, role in (("worker.1", "worker"), ("ps.0", "ps")):
            other = json.loads((trial_dir / "tasks" / task / "echo.json").read_text())
            assert other["argv"] == [role] and other["sys_dir"] == f"{mount}/golden/trials/Tr1al/tasks/{task}"
