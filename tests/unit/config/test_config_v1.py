"""Legacy v1 configs convert to v2 key for key as NNI's ``to_v2`` (nni-surface §2.8) and then load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from trialfleet import (
    AdlConfig,
    DltsConfig,
    FrameworkControllerConfig,
    KubeflowConfig,
    OpenpaiConfig,
    RemoteConfig,
)
from trialfleet.config import convert_v1_to_v2, load_config
from trialfleet.config.convert_v1 import V1Conversion, convert_v1
from trialfleet.errors import ConfigError


def _convert(data_dir: Path, name: str) -> tuple[dict[str, Any], list[str]]:
    return convert_v1_to_v2(yaml.safe_load((data_dir / name).read_text()))


def test_local(data_dir: Path) -> None:
    v2, warnings = _convert(data_dir, "v1_local.yml")
    assert v2 == {
        "experimentName": "example_mnist_pytorch",
        "searchSpaceFile": "search_space.json",
        "trialCommand": "python3 mnist.py",
        "trialCodeDirectory": "trial_code",
        "trialGpuNumber": 1,
        "trialConcurrency": 1,
        "maxExperimentDuration": "1h",
        "maxTrialNumber": 10,
        "logLevel": "info",
        "useAnnotation": False,
        "tunerGpuIndices": "0",
        "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "maximize"}},
        "assessor": {"name": "Curvefitting", "classArgs": {"epoch_num": 20}},
        "trainingService": {
            "platform": "local",
            "gpuIndices": "0,1",
            "maxTrialNumberPerGpu": 2,
            "useActiveGpu": True,
        },
    }
    dropped = {w.split(" ")[0] for w in warnings}
    assert dropped == {
        "authorName",
        "description",
        "multiThread",
        "versionCheck",
        "logCollection",
        "tuner.includeIntermediateResults",
    }


def test_local_loads(data_dir: Path) -> None:
    shown: list[V1Conversion] = []
    loaded = load_config(data_dir / "v1_local.yml", on_converted=shown.append)
    assert loaded.converted_from_v1
    assert loaded.converted_yaml is not None and [c.shown() for c in shown] == [loaded.converted_yaml]
    assert yaml.safe_load(loaded.converted_yaml) == _convert(data_dir, "v1_local.yml")[0]
    assert loaded.converted_yaml.startswith("experimentName: example_mnist_pytorch\n")
    assert any("authorName" in w for w in loaded.warnings)
    config = loaded.config
    assert config.max_experiment_duration == 3600 and config.tuner_gpu_indices == [0]
    assert config.trial_code_directory == data_dir / "trial_code"  # relative to the v1 file, as nnictl


def test_remote(data_dir: Path) -> None:
    v2, _ = _convert(data_dir, "v1_remote.yml")
    assert v2["nniManagerIp"] == "10.10.10.1"
    assert v2["tuner"] == {
        "className": "my_tuner.MyTuner",
        "codeDirectory": "trial_code",
        "classArgs": {"optimize_mode": "maximize"},
    }
    assert v2["trainingService"] == {
        "platform": "remote",
        "reuseMode": False,
        "machineList": [
            {
                "host": "192.0.2.11",
                "port": 22,
                "user": "alice",
                "sshKeyFile": "~/.ssh/id_rsa",
                "sshPassphrase": "open sesame",  # NNI writes "passphrase", which its own v2 schema refuses
                "pythonPath": "/opt/conda/envs/nni/bin",
            },
            {
                "host": "192.0.2.12",
                "user": "bob",
                "password": "hunter2",
                "gpuIndices": "0",
                "maxTrialNumberPerGpu": 1,
                "useActiveGpu": True,
            },
        ],
    }
    config = load_config(data_dir / "v1_remote.yml").config
    assert isinstance(config.training_service, RemoteConfig)
    assert config.tuner.code_directory == data_dir / "trial_code"


def test_pai(data_dir: Path) -> None:
    v2, warnings = _convert(data_dir, "v1_pai.yml")
    assert v2["trialGpuNumber"] == 1
    assert v2["trainingService"] == {
        "platform": "openpai",
        "username": "alice",
        "token": "very-secret-token",
        "host": "10.1.1.1",
        "reuseMode": True,
        "localStorageMountPoint": "trial_code",
        "containerStorageMountPoint": "/mnt/data/nni",
        "trialCpuNumber": 1,
        "trialMemorySize": 8196,
        "dockerImage": "msranni/nni:latest",
        "virtualCluster": "default",
        "storageConfigName": "confignfs-data",
    }
    assert any(w.startswith("paiConfig.maxTrialNumPerGpu") for w in warnings)
    assert any(w.startswith("paiConfig.useActiveGpu") for w in warnings)
    assert any("shmMB" in w for w in warnings)
    service = load_config(data_dir / "v1_pai.yml").config.training_service
    assert isinstance(service, OpenpaiConfig) and service.host == "https://10.1.1.1"


def test_kubeflow(data_dir: Path) -> None:
    v2, warnings = _convert(data_dir, "v1_kubeflow.yml")
    assert "trialCommand" not in v2
    role = {
        "command": "python3 dist_mnist.py",
        "gpuNumber": 0,
        "cpuNumber": 1,
        "memorySize": 8196,
        "dockerImage": "msranni/nni:latest",
        "replicas": 1,
        "codeDirectory": "trial_code",
    }
    assert v2["trainingService"] == {
        "platform": "kubeflow",
        "operator": "tf-operator",
        "apiVersion": "v1alpha2",
        "storage": {"storageType": "nfs", "server": "10.10.10.10", "path": "/var/nfs/general"},
        "ps": role,
        # kept, unlike NNI's converter: trialfleet makes an image pull secret of it
        "worker": {**role, "privateRegistryAuthPath": "/home/alice/.docker/config.json"},
    }
    assert any(w.startswith("kubeflowConfig.uploadRetryCount") for w in warnings)
    assert not any("privateRegistryAuthPath" in w for w in warnings)
    service = load_config(data_dir / "v1_kubeflow.yml").config.training_service
    assert isinstance(service, KubeflowConfig) and service.trial_command == ""


def test_frameworkcontroller(data_dir: Path) -> None:
    v2, _ = _convert(data_dir, "v1_frameworkcontroller.yml")
    assert v2["trialCommand"] == "python3 mnist.py"  # taken from the first task role
    assert v2["assessor"] == {"name": "Medianstop", "classArgs": {"optimize_mode": "maximize"}}
    assert v2["trainingService"] == {
        "platform": "frameworkcontroller",
        "serviceAccountName": "frameworkcontroller",
        "storage": {
            "storageType": "azureStorage",
            "azureAccount": "nnistorage",
            "azureShare": "nni-share",
            "keyVaultName": "nni-vault",
            "keyVaultKey": "storage-key",
        },
        "taskRoles": [
            {
                "command": "python3 mnist.py",
                "gpuNumber": 1,
                "cpuNumber": 1,
                "memorySize": 8192,
                "dockerImage": "msranni/nni:latest",
                "name": "worker",
                "taskNumber": 1,
                "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
            }
        ],
    }
    service = load_config(data_dir / "v1_frameworkcontroller.yml").config.training_service
    assert isinstance(service, FrameworkControllerConfig)


def test_adl_loads_as_adl_config(data_dir: Path) -> None:
    config = load_config(data_dir / "v1_adl.yml").config
    service = config.training_service
    assert isinstance(service, AdlConfig)
    assert service.adaptive is True and service.memory_size == "8Gi" and service.cpu_number == 1
    assert service.nfs is not None and service.nfs.container_mount_path == "/nfs"
    assert service.checkpoint is not None and service.checkpoint.storage_size == "1Gi"
    assert service.image_pull_secrets is not None and service.image_pull_secrets[0].name == "stagingsecret"
    assert service.trial_gpu_number == 1 and service.nni_manager_ip == "10.1.10.11"


def test_dlts_loads_as_dlts_config(data_dir: Path) -> None:
    """NNI's own DLTS example (examples/trials/mnist-tfv1/config_dlts.yml) and the rest of ``dltsConfig``."""
    v2, warnings = _convert(data_dir, "v1_dlts.yml")
    assert v2["trainingService"] == {
        "platform": "dlts",
        "image": "msranni/nni:latest",
        "dashboard": "http://azure-eastus-p40-dev1-infra01.eastus.cloudapp.azure.com/",
        "team": "platform",
        "email": "alice@example.com",
        "password": "0123456789abcdef0123456789abcdef",
        "gpuType": "P40",
    }
    assert warnings == [
        "authorName is not used by v2 configs and was dropped",
        "trial.nasMode is not used by v2 configs and was dropped",
    ]
    service = load_config(data_dir / "v1_dlts.yml").config.training_service
    assert isinstance(service, DltsConfig)
    assert service.cluster == ".default" and service.trial_gpu_number == 1 and service.gpu_type == "P40"
    assert service.password is not None and service.password.get_secret_value().startswith("0123")


V1_BASE = """\
authorName: default
experimentName: x
trialConcurrency: 1
searchSpacePath: search_space.json
useAnnotation: false
tuner:
  builtinTunerName: TPE
trial:
  command: python3 trial.py
  codeDir: code
"""


@pytest.mark.parametrize(
    ("extra", "key_path", "message"),
    [
        (
            "trainingServicePlatform: local\nmultiPhase: true\n",
            "multiPhase",
            "multi-phase experiments are not supported",
        ),
        (
            "trainingServicePlatform: hybrid\n",
            "hybridConfig.trainingServicePlatforms",
            "expected a list of platforms, got null",
        ),
        (
            "trainingServicePlatform: hybrid\nhybridConfig: {trainingServicePlatforms: [local, local]}\n",
            "hybridConfig.trainingServicePlatforms[1]",
            "local is listed twice",
        ),
        ("trainingServicePlatform: mars\n", "trainingServicePlatform", "expected one of local, remote"),
        ("", "trainingServicePlatform", "required field is missing"),
        ("trainingServicePlatform: remote\n", "machineList", "expected a list of machines, got null"),
        (
            "trainingServicePlatform: frameworkcontroller\nframeworkcontrollerConfig: {storage: pvc}\n"
            "trial: {taskRoles: []}\n",
            "frameworkcontrollerConfig.storage",
            "'pvc' storage cannot be converted",
        ),
    ],
)
def test_unconvertible(write_config: Callable[..., Path], extra: str, key_path: str, message: str) -> None:
    # an ``extra`` with its own trial block replaces the base one (a repeated key is itself an error)
    text = V1_BASE + extra if "trial:" not in extra else V1_BASE.split("trial:")[0] + extra
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    error = caught.value
    assert error.file == str(path)
    assert [p.key_path for p in error.problems] == [key_path]
    assert message in error.problems[0].message
    assert str(path) in str(error)


def test_custom_algorithm_needs_a_py_file(write_config: Callable[..., Path]) -> None:
    path = write_config(
        V1_BASE.replace("builtinTunerName: TPE", "codeDir: code\n  classFileName: tuner.txt\n  className: T")
        + "trainingServicePlatform: local\n"
    )
    with pytest.raises(ConfigError, match=r"tuner: expected builtinTunerName, or codeDir \+ classFileName"):
        load_config(path)


def test_v2_errors_of_a_converted_config_name_the_file(write_config: Callable[..., Path]) -> None:
    path = write_config(
        V1_BASE.replace("trialConcurrency: 1", "trialConcurrency: many") + "trainingServicePlatform: local\n"
    )
    shown: list[V1Conversion] = []
    with pytest.raises(ConfigError) as caught:
        load_config(path, on_converted=shown.append)
    assert "trialConcurrency: many" in shown[0].shown()  # the CLI can still show what was validated
    assert str(caught.value).startswith(f"{path}: 1 problem(s)")
    assert "trialConcurrency: expected an integer, got 'many'" in str(caught.value)


def test_hybrid_becomes_a_list_of_blocks_each_from_its_own_section(data_dir: Path) -> None:
    v2, warnings = _convert(data_dir, "v1_hybrid.yml")
    assert warnings == ["authorName is not used by v2 configs and was dropped"]
    assert (v2["trialCommand"], v2["trialGpuNumber"]) == ("python3 mnist.py", 0)
    assert v2["trainingService"] == [
        {"platform": "local", "useActiveGpu": False},
        {
            "platform": "remote",
            "reuseMode": True,
            "machineList": [{"host": "192.0.2.11", "user": "alice", "sshKeyFile": "~/.ssh/id_rsa"}],
        },
        {
            "platform": "aml",
            "dockerImage": "msranni/nni:v2.0",  # the trial key a member takes is taken once
            "subscriptionId": "00000000-1111-2222-3333-444444444444",
            "resourceGroup": "nni-rg",
            "workspaceName": "nni-workspace",
            "computeTarget": "gpu-cluster",
        },
    ]
    config = load_config(data_dir / "v1_hybrid.yml").config
    assert [block.platform for block in config.training_services] == ["local", "remote", "aml"]
    assert {block.trial_command for block in config.training_services} == {"python3 mnist.py"}


@pytest.mark.parametrize(
    ("file", "block"),
    [
        ("v1_kubeflow.yml", "kubeflowConfig"),
        ("v1_frameworkcontroller.yml", "frameworkcontrollerConfig"),
    ],
)
@pytest.mark.parametrize("inside", ["storage block", "platform block"])
def test_kubernetes_local_mount_point_is_kept(
    data_dir: Path, tmp_path: Path, file: str, block: str, inside: str
) -> None:
    """NNI's v1 had no key for where this machine mounts the export; trialfleet takes ``localMountPoint`` in the
    storage's block (``nfs``, ``azureStorage``) or beside it, so such a config runs where the export is mounted
    elsewhere than at NNI's own path."""
    v1 = yaml.safe_load((data_dir / file).read_text())
    storage_block = "nfs" if "nfs" in v1[block] else "azureStorage"
    target = v1[block][storage_block] if inside == "storage block" else v1[block]
    target["localMountPoint"] = str(tmp_path)
    v2, warnings = convert_v1_to_v2(v1)
    assert v2["trainingService"]["storage"]["localMountPoint"] == str(tmp_path)
    assert not any("localMountPoint" in w for w in warnings)


@pytest.mark.parametrize("file", ["v1_remote.yml", "v1_pai.yml", "v1_dlts.yml"])
def test_the_shown_v2_form_masks_what_the_stored_config_masks(data_dir: Path, file: str) -> None:
    loaded = load_config(data_dir / file)
    assert loaded.converted_yaml is not None
    shown = yaml.safe_load(loaded.converted_yaml)
    stored = loaded.config.to_json()
    secrets = _leaves(loaded.config.to_json(include_secrets=True)) - _leaves(stored)
    assert secrets and not [secret for secret in secrets if secret in loaded.converted_yaml]
    assert _masked_paths(shown) == _masked_paths(stored) != []


def _leaves(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {leaf for item in value.values() for leaf in _leaves(item)}
    if isinstance(value, list):
        return {leaf for item in value for leaf in _leaves(item)}
    return {value} if isinstance(value, str) else set()


def _masked_paths(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _masked_paths(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _masked_paths(item, f"{path}[{index}]")]
    return [path.rsplit(".", 1)[-1]] if value == "******" else []


def test_the_shown_v2_form_is_never_folded(write_config: Callable[..., Path]) -> None:
    long_command = "python3 train.py " + " ".join(f"--option-{i}=value-{i}" for i in range(40))
    v1 = V1_BASE.replace("command: python3 trial.py", f"command: {long_command}")
    path = write_config(v1 + "trainingServicePlatform: local\n")
    loaded = load_config(path)
    assert loaded.converted_yaml is not None
    assert f"trialCommand: {long_command}\n" in loaded.converted_yaml
    assert yaml.safe_load(loaded.converted_yaml)["trialCommand"] == long_command


def test_no_warning_about_a_key_the_conversion_wrote(data_dir: Path) -> None:
    """NNI's converter gives each Kubeflow role a codeDirectory the user never wrote (its v2 schema wants
    one); trialfleet keeps it in the v2 form but does not warn about it."""
    loaded = load_config(data_dir / "v1_kubeflow.yml")
    assert not [w for w in loaded.warnings if "codeDirectory" in w]
    shown = yaml.safe_load(loaded.converted_yaml or "")
    assert shown["trainingService"]["worker"]["codeDirectory"] == "trial_code"


def test_a_written_code_directory_is_still_warned_about(data_dir: Path, tmp_path: Path) -> None:
    v2 = yaml.safe_load(load_config(data_dir / "v1_kubeflow.yml").converted_yaml or "")
    v2["searchSpaceFile"] = str(data_dir / "search_space.json")
    v2["trialCodeDirectory"] = str(data_dir / "trial_code")
    v2["trainingService"]["worker"]["codeDirectory"] = str(data_dir / "trial_code")
    del v2["trainingService"]["ps"]
    (tmp_path / "v2.yml").write_text(yaml.safe_dump(v2))
    warnings = load_config(tmp_path / "v2.yml").warnings
    assert [w for w in warnings if w.startswith("trainingService.worker.codeDirectory:")]


@pytest.mark.parametrize(
    ("file", "has_v2"), [("v1_adl.yml", False), ("v1_dlts.yml", False), ("v1_pai.yml", True)]
)
def test_nni_has_a_v2_form_only_for_its_v2_platforms(data_dir: Path, file: str, has_v2: bool) -> None:
    conversion = convert_v1(yaml.safe_load((data_dir / file).read_text()))
    assert conversion.nni_has_v2_form is has_v2


def test_an_api_version_operators_no_longer_serve_is_said_when_the_config_loads(
    data_dir: Path, tmp_path: Path
) -> None:
    """NNI's examples name v1alpha2; the manager falls back to v1, and the user hears of it at create, not only
    in manager.log."""
    loaded = load_config(data_dir / "v1_kubeflow.yml")
    assert [w for w in loaded.warnings if w.startswith("kubeflow apiVersion v1alpha2: ")]
    v2 = yaml.safe_load(loaded.converted_yaml or "")
    v2["searchSpaceFile"] = str(data_dir / "search_space.json")
    v2["trialCodeDirectory"] = str(data_dir / "trial_code")
    v2["trainingService"]["apiVersion"] = "v1"
    (tmp_path / "v2.yml").write_text(yaml.safe_dump(v2))
    assert not [w for w in load_config(tmp_path / "v2.yml").warnings if "apiVersion" in w]
