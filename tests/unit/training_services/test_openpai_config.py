"""``platform: openpai``: NNI's keys (v2 and v1), what is required when, and a user's own job protocol merged with
the block (``openpaiConfig`` / ``openpaiConfigFile``) into the template every trial's job is made from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trialfleet.config import ExperimentConfig, convert_v1_to_v2
from trialfleet.config.pipeline import unacted_warnings
from trialfleet.errors import ConfigError
from trialfleet.training_services.openpai import OpenpaiConfig
from trialfleet.training_services.openpai.template import NNI_IMAGE, job_template

# NNI's OpenPAI document (nni-docs, "OpenPAI Training Service"), as written there
NNI_V2_BLOCK = """
platform: openpai
host: http://123.123.123.123
username: alice
token: the-token
dockerImage: msranni/nni
trialCpuNumber: 1
trialMemorySize: 8GB
storageConfigName: confignfs-data
localStorageMountPoint: {mount}
containerStorageMountPoint: /mnt/confignfs-data
"""

USER_PROTOCOL = {
    "protocolVersion": 2,
    "name": "my_job",
    "type": "job",
    "jobRetryCount": 3,
    "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "pytorch/pytorch:latest"}],
    "taskRoles": {
        "worker": {
            "instances": 2,
            "taskRetryCount": 2,
            "dockerImage": "img",
            "resourcePerInstance": {"cpu": 4, "memoryMB": 8192, "gpu": 1},
            "commands": ["cd src", "python train.py"],
        },
        "ps": {"instances": 1, "resourcePerInstance": {"cpu": 2}, "commands": ["python ps.py"]},
    },
    "defaults": {"virtualCluster": "vc_a"},
    "extras": {"storages": [{"name": "team-nfs", "mountPath": "/data"}]},
}


def experiment(block: dict[str, Any], **top: Any) -> ExperimentConfig:
    data = {
        "searchSpace": {"x": {"_type": "choice", "_value": [1]}},
        "trialCommand": "python3 trial.py",
        "trialConcurrency": 1,
        "tuner": {"name": "Random"},
        "trainingService": block,
        **top,
    }
    return ExperimentConfig.from_dict(data)


def service(config: ExperimentConfig) -> OpenpaiConfig:
    block = config.training_service
    assert isinstance(block, OpenpaiConfig)
    return block


def problems(block: dict[str, Any], **top: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        experiment(block, **top)
    return str(caught.value)


def test_nni_s_documented_block_loads_as_written(tmp_path: Path) -> None:
    block = yaml.safe_load(NNI_V2_BLOCK.format(mount=tmp_path))
    config = service(experiment(block, trialGpuNumber=0))
    assert (config.host, config.username, config.token.get_secret_value()) == (
        "http://123.123.123.123",
        "alice",
        "the-token",
    )
    assert (config.trial_cpu_number, config.trial_memory_size, config.trial_gpu_number) == (1, 8192, 0)
    assert (config.docker_image, config.storage_config_name) == ("msranni/nni", "confignfs-data")
    assert config.local_storage_mount_point == tmp_path and config.reuse_mode is True  # NNI's default
    template, found = job_template(config, None)
    assert found == [] and template is not None
    assert (template.storage, template.mount, template.tasks, template.primary) == (
        "confignfs-data",
        "/mnt/confignfs-data",
        1,
        "taskrole",
    )
    assert template.protocol["taskRoles"]["taskrole"]["resourcePerInstance"] == {
        "cpu": 1,
        "memoryMB": 8192,
        "gpu": 0,
    }
    assert "defaults" not in template.protocol  # no virtualCluster: OpenPAI's default one


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("10.1.1.1", "https://10.1.1.1"),
        ("http://pai:8080/", "http://pai:8080"),
        ("https://pai.example.org", "https://pai.example.org"),
    ],
)
def test_https_is_assumed_when_the_host_has_no_scheme(tmp_path: Path, host: str, expected: str) -> None:
    block = yaml.safe_load(NNI_V2_BLOCK.format(mount=tmp_path)) | {"host": host}
    assert service(experiment(block, trialGpuNumber=0)).host == expected


def test_without_a_job_protocol_the_resources_gpus_and_storage_are_required(tmp_path: Path) -> None:
    block = {
        "platform": "openpai",
        "host": "h",
        "username": "u",
        "token": "t",
        "localStorageMountPoint": str(tmp_path),
    }
    text = problems(block)
    for key in ("trialCpuNumber", "trialMemorySize", "storageConfigName"):
        assert f"trainingService.{key}: required field is missing" in text
    assert "\n  - trialGpuNumber: required field is missing" in text  # where NNI's examples set it


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("containerStorageMountPoint", "mnt/data", "expected an absolute path"),
        ("containerStorageMountPoint", "/mnt/<% $parameters.x %>", "cannot contain '<%'"),
        ("virtualCluster", "vc-1", "letters, digits and _ only"),
        ("host", "ftp://pai", "expected an http:// or https:// address"),
        ("trialCpuNumber", 0, "greater than 0"),
        (
            "localStorageMountPoint",
            "/no/such/mount/point",
            "local storage mount point /no/such/mount/point does not exist",
        ),
    ],
)
def test_bad_values_are_refused_by_name(tmp_path: Path, key: str, value: Any, expected: str) -> None:
    block = yaml.safe_load(NNI_V2_BLOCK.format(mount=tmp_path)) | {key: value}
    text = problems(block, trialGpuNumber=0)
    assert f"trainingService.{key}" in text and expected in text


def test_reuse_mode_is_nni_s_default_and_acted_on_without_a_warning(tmp_path: Path) -> None:
    """Acted on where the storage is mounted here (docs/reuse.md); the service says at start where it is not."""
    for reuse in (True, False):
        block = yaml.safe_load(NNI_V2_BLOCK.format(mount=tmp_path)) | {"reuseMode": reuse}
        config = experiment(block, trialGpuNumber=0)
        assert unacted_warnings(config) == [] and config.training_services[0].reuse_mode is reuse


def test_without_a_local_mount_point_the_relay_is_used(tmp_path: Path) -> None:
    block = yaml.safe_load(NNI_V2_BLOCK.format(mount=tmp_path)) | {
        "relayPort": 9090,
        "nniManagerIp": "10.0.0.5",
    }
    del block["localStorageMountPoint"]
    config = service(experiment(block, trialGpuNumber=0))
    assert (config.local_storage_mount_point, config.relay_port, config.nni_manager_ip) == (
        None,
        9090,
        "10.0.0.5",
    )
    assert "relayPort" in problems(block | {"relayPort": 70000}, trialGpuNumber=0)


# ---- a job protocol of the user's own ----------------------------------------------------------------------


def protocol_block(tmp_path: Path, protocol: dict[str, Any], **keys: Any) -> dict[str, Any]:
    block = {
        "platform": "openpai",
        "host": "h",
        "username": "u",
        "token": "t",
        "localStorageMountPoint": str(tmp_path),
    }
    return block | {"openpaiConfig": protocol} | keys


def test_a_protocol_that_states_the_resources_needs_no_resource_fields(tmp_path: Path) -> None:
    config = service(
        experiment(
            protocol_block(tmp_path, USER_PROTOCOL, trialCpuNumber=1, trialGpuNumber=0, trialMemorySize=512)
        )
    )
    template, found = job_template(config, config.user_protocol())
    assert found == [] and template is not None
    assert (template.storage, template.mount, template.tasks, template.primary) == (
        "team-nfs",
        "/data",
        3,
        "worker",
    )
    assert template.role_commands == {"worker": "cd src && python train.py", "ps": "python ps.py"}
    roles = template.protocol["taskRoles"]
    assert roles["worker"]["resourcePerInstance"] == {
        "cpu": 4,
        "memoryMB": 8192,
        "gpu": 1,
    }  # the protocol wins
    assert roles["ps"]["resourcePerInstance"] == {
        "cpu": 2,
        "memoryMB": 512,
        "gpu": 0,
    }  # the block fills the gaps
    assert (
        roles["ps"]["dockerImage"] == NNI_IMAGE
        and {"type": "dockerimage", "uri": "msranni/nni:latest", "name": NNI_IMAGE}
        in template.protocol["prerequisites"]
    )
    assert (
        template.protocol["jobRetryCount"] == 0 and roles["worker"]["taskRetryCount"] == 0
    )  # retries are trialfleet's
    assert set(template.overridden) == {"trialCpuNumber", "trialMemorySize", "trialGpuNumber"}
    assert USER_PROTOCOL["jobRetryCount"] == 3  # the config's own protocol is left as it was


def test_what_neither_the_protocol_nor_the_block_states_is_required(tmp_path: Path) -> None:
    text = problems(protocol_block(tmp_path, USER_PROTOCOL))
    assert (
        "trainingService.trialMemorySize: required field is missing (the job protocol's ps.resourcePerInstance.memoryMB"
        in text
    )
    assert "- trialGpuNumber: required field is missing" in text and "trialCpuNumber" not in text


def test_the_storage_is_named_when_the_protocol_mounts_several(tmp_path: Path) -> None:
    protocol = USER_PROTOCOL | {"extras": {"storages": [{"name": "a"}, {"name": "b", "mountPath": "/b"}]}}
    sized = {"trialMemorySize": 512, "trialGpuNumber": 0}
    assert (
        "trainingService.storageConfigName: required field is missing: the job protocol mounts several storages"
        in problems(protocol_block(tmp_path, protocol, **sized))
    )
    config = service(experiment(protocol_block(tmp_path, protocol, storageConfigName="b", **sized)))
    template, _ = job_template(config, config.user_protocol())
    assert template is not None and (template.storage, template.mount) == ("b", "/b")
    added = service(
        experiment(
            protocol_block(
                tmp_path, protocol, storageConfigName="c", containerStorageMountPoint="/c", **sized
            )
        )
    )
    template, _ = job_template(added, added.user_protocol())
    assert template is not None and template.protocol["extras"]["storages"][-1] == {
        "name": "c",
        "mountPath": "/c",
    }
    clash = protocol_block(
        tmp_path, protocol, storageConfigName="b", containerStorageMountPoint="/elsewhere", **sized
    )
    assert "the job protocol mounts storage b at /b, not at /elsewhere" in problems(clash)


def test_openpai_config_file_is_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "job.yml"
    path.write_text(yaml.safe_dump(USER_PROTOCOL))
    block = protocol_block(tmp_path, {}, trialMemorySize=512, trialGpuNumber=0)
    del block["openpaiConfig"]
    config = service(experiment(block | {"openpaiConfigFile": str(path)}))
    assert config.user_protocol() == USER_PROTOCOL
    path.write_text("taskRoles: [unclosed")
    assert "is not valid YAML" in problems(block | {"openpaiConfigFile": str(path)})
    path.write_text("- a list")
    assert "does not hold a job protocol" in problems(block | {"openpaiConfigFile": str(path)})
    both = block | {"openpaiConfigFile": str(path), "openpaiConfig": USER_PROTOCOL}
    assert "set either openpaiConfig or openpaiConfigFile, not both" in problems(both)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"taskRoles": {}}, "openpaiConfig.taskRoles: the job protocol needs taskRoles"),
        (
            {"taskRoles": {"1st": {"commands": ["x"]}}},
            "openpaiConfig.taskRoles.1st: OpenPAI names task roles",
        ),
        (
            {"taskRoles": {"main": {"commands": []}}},
            "openpaiConfig.taskRoles.main.commands: expected the role's commands",
        ),
        (
            {"taskRoles": {"main": {"commands": ["x"], "instances": 0}}},
            "main.instances: expected a whole number",
        ),
    ],
)
def test_an_unusable_protocol_is_refused_where_it_goes_wrong(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    block = protocol_block(
        tmp_path, USER_PROTOCOL | change, trialCpuNumber=1, trialMemorySize=512, trialGpuNumber=0
    )
    assert expected in problems(block)


# ---- v1 ----------------------------------------------------------------------------------------------------

# NNI's v1 OpenPAI document (PaiMode), as written there but for the code directory and mount point
NNI_V1 = """
authorName: your_name
experimentName: auto_mnist
trialConcurrency: 2
maxExecDuration: 3h
maxTrialNum: 100
trainingServicePlatform: pai
searchSpacePath: search_space.json
useAnnotation: false
tuner:
  builtinTunerName: TPE
  classArgs:
    optimize_mode: maximize
trial:
  command: python3 mnist.py
  codeDir: {code}
  gpuNum: 0
  cpuNum: 1
  memoryMB: 8196
  image: msranni/nni:latest
  virtualCluster: default
  nniManagerNFSMountPath: {mount}
  containerNFSMountPath: /mnt/confignfs-data
  paiStorageConfigName: confignfs-data
paiConfig:
  userName: your_pai_nni_user
  token: your_pai_token
  host: 10.1.1.1
  reuse: true
"""


def test_nni_s_documented_v1_config_converts_key_for_key(tmp_path: Path) -> None:
    v2, warnings = convert_v1_to_v2(yaml.safe_load(NNI_V1.format(code=tmp_path, mount=tmp_path)))
    assert v2["trialGpuNumber"] == 0 and v2["trialCommand"] == "python3 mnist.py"
    assert v2["trainingService"] == {
        "platform": "openpai",
        "localStorageMountPoint": str(tmp_path),
        "containerStorageMountPoint": "/mnt/confignfs-data",
        "trialCpuNumber": 1,
        "trialMemorySize": 8196,
        "dockerImage": "msranni/nni:latest",
        "virtualCluster": "default",
        "storageConfigName": "confignfs-data",
        "username": "your_pai_nni_user",
        "token": "your_pai_token",
        "host": "10.1.1.1",
        "reuseMode": True,
    }
    assert warnings == ["authorName is not used by v2 configs and was dropped"]


def test_v1_pai_config_resources_win_over_the_trial_s_as_in_nni() -> None:
    v1 = yaml.safe_load(NNI_V1.format(code=".", mount="."))
    v1["paiConfig"] |= {"cpuNum": 4, "memoryMB": 2048, "gpuNum": 1, "passWord": "x"}
    v2, warnings = convert_v1_to_v2(v1)
    block = v2["trainingService"]
    assert (block["trialCpuNumber"], block["trialMemorySize"], block["trialGpuNumber"]) == (4, 2048, 1)
    assert "paiConfig.passWord is not used by v2 configs and was dropped" in warnings
