"""NNI 3.0's config keys, one row each (docs/nni-compatibility.md): every v2 key of the experiment, its
algorithms and the local and remote platforms, every legacy v1 key of those platforms, and the blocks of the
platforms that are accepted but not available yet. Each row loads a config file holding the key and checks
where its value lands, or the warning that names it when trialfleet accepts it without acting on it."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trialfleet import LocalConfig, RemoteConfig
from trialfleet.config import ExperimentConfig, LoadedConfig, load_config
from trialfleet.errors import ConfigError, PlatformNotAvailableError

V2_BASE: dict[str, Any] = {
    "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
    "trialCommand": "python3 trial.py",
    "trialCodeDirectory": "code",
    "trialConcurrency": 1,
    "tuner": {"name": "TPE"},
    "trainingService": {"platform": "local"},
}
MACHINE = {"host": "192.0.2.1", "user": "alice", "password": "secret"}

Check = Callable[[LoadedConfig, Path], None]


def _load(workdir: Path, data: dict[str, Any], name: str = "config.yml") -> LoadedConfig:
    path = workdir / name
    path.write_text(json.dumps(data))  # JSON is YAML
    return load_config(path)


def _acted(key: str, value: Callable[[LoadedConfig], Any], expected: Any) -> Check:
    """Kept, and not named in any warning: trialfleet acts on it."""

    def check(loaded: LoadedConfig, _: Path) -> None:
        assert not any(w.startswith(f"{key}:") for w in loaded.warnings), loaded.warnings
        _eq(value(loaded), expected)

    return check


def _unacted(key: str) -> Check:
    """Accepted, and named in a warning as not acted on."""

    def check(loaded: LoadedConfig, _: Path) -> None:
        assert any(w.startswith(f"{key}:") and "accepted but not acted on" in w for w in loaded.warnings), (
            loaded.warnings
        )

    return check


def _top(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = copy.deepcopy(V2_BASE)
    edit(data)
    return data


def _set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.update(values)


def _service(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["trainingService"].update(values)


def _remote(**machine: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["trainingService"] = {"platform": "remote", "machineList": [{**MACHINE, **machine}]}

    return edit


def _search_space_file(data: dict[str, Any]) -> None:
    data["searchSpaceFile"] = "search_space.json"
    del data["searchSpace"]


def _advisor(data: dict[str, Any]) -> None:
    data["advisor"] = data.pop("tuner") | {"name": "Hyperband"}


def _machine(loaded: LoadedConfig) -> Any:
    service = loaded.config.training_service
    assert isinstance(service, RemoteConfig)
    return service.machine_list[0]


def _local(loaded: LoadedConfig) -> LocalConfig:
    service = loaded.config.training_service
    assert isinstance(service, LocalConfig)
    return service


V2_KEYS: list[tuple[str, Callable[[dict[str, Any]], None], Check]] = [
    ("experimentName", _set(experimentName="mnist"), lambda c, _: _eq(c.config.experiment_name, "mnist")),
    ("experimentType", _set(experimentType="hpo"), lambda c, _: _eq(c.config.experiment_type, "hpo")),
    (
        "searchSpaceFile",
        _search_space_file,
        lambda c, w: _eq(c.config.search_space, json.loads((w / "search_space.json").read_text())),
    ),
    ("searchSpace", _set(), lambda c, _: _eq(c.config.search_space, V2_BASE["searchSpace"])),
    (
        "trialCommand",
        _set(trialCommand="python3 mnist.py --epochs 2"),
        lambda c, _: _eq(c.config.training_services[0].trial_command, "python3 mnist.py --epochs 2"),
    ),
    (
        "trialCodeDirectory",
        _set(),
        lambda c, w: _eq(c.config.training_services[0].trial_code_directory, w.resolve() / "code"),
    ),
    ("trialConcurrency", _set(trialConcurrency=4), lambda c, _: _eq(c.config.trial_concurrency, 4)),
    (
        "trialGpuNumber",
        _set(trialGpuNumber=0),
        lambda c, _: _eq(c.config.training_services[0].trial_gpu_number, 0),
    ),
    (
        "maxExperimentDuration",
        _set(maxExperimentDuration="1.5h"),
        lambda c, _: _eq(c.config.max_experiment_duration, 5400),
    ),
    ("maxTrialNumber", _set(maxTrialNumber=10), lambda c, _: _eq(c.config.max_trial_number, 10)),
    ("maxTrialDuration", _set(maxTrialDuration="10m"), lambda c, _: _eq(c.config.max_trial_duration, 600)),
    ("nniManagerIp", _set(nniManagerIp="10.0.0.1"), _unacted("nniManagerIp")),
    ("useAnnotation", _set(useAnnotation=False), lambda c, _: _eq(c.config.use_annotation, False)),
    ("debug", _set(debug=True), lambda c, _: _eq((c.config.debug, c.config.log_level), (True, "debug"))),
    ("logLevel", _set(logLevel="trace"), lambda c, _: _eq(c.config.log_level, "trace")),
    (
        "experimentWorkingDirectory",
        _set(experimentWorkingDirectory="runs"),
        lambda c, w: _eq(c.config.experiment_working_directory, w.resolve() / "runs"),
    ),
    ("tunerGpuIndices", _set(tunerGpuIndices="0,1"), _unacted("tunerGpuIndices")),
    (
        "tuner",
        _set(tuner={"name": "Evolution", "classArgs": {"population_size": 8}}),
        lambda c, _: _eq(
            (c.config.tuner.name, c.config.tuner.class_args), ("Evolution", {"population_size": 8})
        ),
    ),
    (
        "assessor",
        _set(assessor={"name": "Medianstop", "classArgs": {"start_step": 2}}),
        lambda c, _: _eq(c.config.assessor and c.config.assessor.class_args, {"start_step": 2}),
    ),
    ("advisor", _advisor, lambda c, _: _eq((c.config.tuner.name, c.config.advisor), ("Hyperband", None))),
    ("trainingService", _set(), lambda c, _: _eq(type(c.config.training_service), LocalConfig)),
    (
        "sharedStorage",
        _set(
            sharedStorage={
                "storageType": "NFS",
                "localMountPoint": "code",
                "remoteMountPoint": "/mnt/nfs",
                "localMounted": "usermount",
                "nfsServer": "10.0.0.2",
                "exportedDirectory": "/export",
            }
        ),
        _acted(
            "sharedStorage", lambda c: c.config.shared_storage and c.config.shared_storage.storage_type, "NFS"
        ),
    ),
    # the algorithm blocks (tuner, assessor, advisor)
    (
        "tuner.name (any case, aliases)",
        _set(tuner={"name": "gridsearchtuner"}),
        lambda c, _: _eq(c.config.tuner.name, "gridsearchtuner"),
    ),
    (
        "tuner.className + codeDirectory",
        _set(tuner={"className": "my_tuner.MyTuner", "codeDirectory": "code"}),
        lambda c, w: _eq(
            (c.config.tuner.class_name, c.config.tuner.code_directory),
            ("my_tuner.MyTuner", w.resolve() / "code"),
        ),
    ),
    (
        "tuner.classArgs",
        _set(tuner={"name": "TPE", "classArgs": {"optimize_mode": "maximize", "seed": 3}}),
        lambda c, _: _eq(c.config.tuner.class_args, {"optimize_mode": "maximize", "seed": 3}),
    ),
    # platform: local
    ("local.useActiveGpu", _service(useActiveGpu=True), lambda c, _: _eq(_local(c).use_active_gpu, True)),
    (
        "local.maxTrialNumberPerGpu",
        lambda data: (data.update(trialGpuNumber=1), data["trainingService"].update(maxTrialNumberPerGpu=2)),
        lambda c, _: _eq(_local(c).max_trial_number_per_gpu, 2),
    ),
    ("local.gpuIndices", _service(gpuIndices="0,2"), lambda c, _: _eq(_local(c).gpu_indices, [0, 2])),
    ("local.reuseMode", _service(reuseMode=True), _unacted("trainingService.reuseMode")),
    # platform: remote
    ("remote.machineList", _remote(), lambda c, _: _eq(_machine(c).host, "192.0.2.1")),
    (
        "remote.reuseMode",
        lambda data: (_remote()(data), data["trainingService"].update(reuseMode=True)),
        _acted("trainingService.reuseMode", lambda c: c.config.training_services[0].reuse_mode, True),
    ),
    (
        "remote.host",
        _remote(host="gpu-box.example.org"),
        lambda c, _: _eq(_machine(c).host, "gpu-box.example.org"),
    ),
    ("remote.port", _remote(port=2222), lambda c, _: _eq(_machine(c).port, 2222)),
    ("remote.user", _remote(user="bob"), lambda c, _: _eq(_machine(c).user, "bob")),
    (
        "remote.password",
        _remote(password="hunter2", sshKeyFile="~/.ssh/id_ed25519"),
        lambda c, _: _eq(
            (_machine(c).password.get_secret_value(), _machine(c).ssh_key_file), ("hunter2", None)
        ),
    ),
    (
        "remote.sshKeyFile",
        _remote(password=None, sshKeyFile="~/.ssh/id_ed25519"),
        lambda c, _: _eq(_machine(c).ssh_key_file, Path.home().resolve() / ".ssh" / "id_ed25519"),
    ),
    (
        "remote.sshPassphrase",
        _remote(password=None, sshPassphrase="open sesame"),
        lambda c, _: _eq(_machine(c).ssh_passphrase.get_secret_value(), "open sesame"),
    ),
    ("remote.useActiveGpu", _remote(useActiveGpu=True), lambda c, _: _eq(_machine(c).use_active_gpu, True)),
    (
        "remote.maxTrialNumberPerGpu",
        lambda data: (_remote(maxTrialNumberPerGpu=3)(data), data.update(trialGpuNumber=1)),
        lambda c, _: _eq(_machine(c).max_trial_number_per_gpu, 3),
    ),
    ("remote.gpuIndices", _remote(gpuIndices=1), lambda c, _: _eq(_machine(c).gpu_indices, [1])),
    (
        "remote.pythonPath",
        _remote(pythonPath="/opt/conda/envs/nni/bin"),
        lambda c, _: _eq(_machine(c).python_path, "/opt/conda/envs/nni/bin"),
    ),
]


def _eq(actual: Any, expected: Any) -> None:
    assert actual == expected, (actual, expected)


@pytest.mark.parametrize(("edit", "check"), [(e, c) for _, e, c in V2_KEYS], ids=[k for k, _, _ in V2_KEYS])
def test_v2_key(workdir: Path, edit: Callable[[dict[str, Any]], None], check: Check) -> None:
    check(_load(workdir, _top(edit)), workdir)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(useAnnotation=True), re.escape("useAnnotation is not supported (NNI dropped it in v3.0)")),
        (_set(experimentType="nas"), "experimentType"),
        (_service(trialCommand=None, platform="local", unknown=1), "unknown key 'unknown'"),
    ],
    ids=["useAnnotation: true", "experimentType: nas", "unknown keys"],
)
def test_v2_refusals(workdir: Path, edit: Callable[[dict[str, Any]], None], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(workdir, _top(edit))


# ---- legacy v1 keys (local, remote and the common ones) ------------------------------------------------

V1_BASE: dict[str, Any] = {
    "authorName": "alice",
    "experimentName": "v1",
    "trialConcurrency": 1,
    "trainingServicePlatform": "local",
    "searchSpacePath": "search_space.json",
    "useAnnotation": False,
    "tuner": {"builtinTunerName": "TPE"},
    "trial": {"command": "python3 trial.py", "codeDir": "code"},
}
V1_REMOTE = {
    "trainingServicePlatform": "remote",
    "machineList": [{"ip": "192.0.2.1", "username": "u", "passwd": "p"}],
}


def _v1(**values: Any) -> dict[str, Any]:
    """The base v1 config with ``values`` set; a ``trial`` given is merged into the base one."""
    data = copy.deepcopy(V1_BASE)
    for key, value in values.items():
        data[key] = {**data["trial"], **value} if key == "trial" else value
    return data


def _v1_machine(**values: Any) -> dict[str, Any]:
    return _v1(**V1_REMOTE | {"machineList": [{**V1_REMOTE["machineList"][0], **values}]})  # type: ignore[dict-item]


def _dropped(key: str) -> Check:
    def check(loaded: LoadedConfig, _: Path) -> None:
        assert any(w.startswith(f"{key} is not used by v2 configs") for w in loaded.warnings), loaded.warnings

    return check


V1_KEYS: list[tuple[str, dict[str, Any], Check]] = [
    ("authorName", _v1(), _dropped("authorName")),
    ("experimentName", _v1(), lambda c, _: _eq(c.config.experiment_name, "v1")),
    ("description", _v1(description="d"), _dropped("description")),
    ("trialConcurrency", _v1(trialConcurrency=3), lambda c, _: _eq(c.config.trial_concurrency, 3)),
    ("maxExecDuration", _v1(maxExecDuration="2h"), lambda c, _: _eq(c.config.max_experiment_duration, 7200)),
    ("maxTrialDuration", _v1(maxTrialDuration="30m"), lambda c, _: _eq(c.config.max_trial_duration, 1800)),
    ("maxTrialNum", _v1(maxTrialNum=20), lambda c, _: _eq(c.config.max_trial_number, 20)),
    ("trainingServicePlatform", _v1(), lambda c, _: _eq(type(c.config.training_service), LocalConfig)),
    (
        "searchSpacePath",
        _v1(),
        lambda c, w: _eq(c.config.search_space_file, w.resolve() / "search_space.json"),
    ),
    ("multiPhase: false", _v1(multiPhase=False), lambda c, _: _eq(c.converted_from_v1, True)),
    ("multiThread", _v1(multiThread=True), _dropped("multiThread")),
    ("nniManagerIp", _v1(nniManagerIp="10.0.0.1"), _unacted("nniManagerIp")),
    (
        "logDir",
        _v1(logDir="runs"),
        lambda c, w: _eq(c.config.experiment_working_directory, w.resolve() / "runs"),
    ),
    ("debug", _v1(debug=True), lambda c, _: _eq(c.config.debug, True)),
    ("versionCheck", _v1(versionCheck=True), _dropped("versionCheck")),
    ("logLevel", _v1(logLevel="warning"), lambda c, _: _eq(c.config.log_level, "warning")),
    ("logCollection", _v1(logCollection="http"), _dropped("logCollection")),
    ("useAnnotation: false", _v1(), lambda c, _: _eq(c.config.use_annotation, False)),
    (
        "tuner.builtinTunerName + classArgs",
        _v1(tuner={"builtinTunerName": "Anneal", "classArgs": {"optimize_mode": "maximize"}}),
        lambda c, _: _eq(
            (c.config.tuner.name, c.config.tuner.class_args), ("Anneal", {"optimize_mode": "maximize"})
        ),
    ),
    (
        "tuner.codeDir + classFileName + className",
        _v1(tuner={"codeDir": "code", "classFileName": "my_tuner.py", "className": "MyTuner"}),
        lambda c, w: _eq(
            (c.config.tuner.class_name, c.config.tuner.code_directory),
            ("my_tuner.MyTuner", w.resolve() / "code"),
        ),
    ),
    (
        "tuner.includeIntermediateResults",
        _v1(tuner={"builtinTunerName": "TPE", "includeIntermediateResults": True}),
        _dropped("tuner.includeIntermediateResults"),
    ),
    (
        "tuner.gpuIndices",
        _v1(tuner={"builtinTunerName": "TPE", "gpuIndices": "0"}),
        _unacted("tunerGpuIndices"),
    ),
    (
        "assessor.builtinAssessorName",
        _v1(assessor={"builtinAssessorName": "Medianstop", "classArgs": {"start_step": 3}}),
        lambda c, _: _eq(
            c.config.assessor and (c.config.assessor.name, c.config.assessor.class_args),
            ("Medianstop", {"start_step": 3}),
        ),
    ),
    (
        "advisor.builtinAdvisorName",
        {k: v for k, v in _v1(advisor={"builtinAdvisorName": "BOHB"}).items() if k != "tuner"},
        lambda c, _: _eq(c.config.tuner.name, "BOHB"),
    ),
    (
        "trial.command",
        _v1(),
        lambda c, _: _eq(c.config.training_services[0].trial_command, "python3 trial.py"),
    ),
    (
        "trial.codeDir",
        _v1(),
        lambda c, w: _eq(c.config.training_services[0].trial_code_directory, w.resolve() / "code"),
    ),
    (
        "trial.gpuNum",
        _v1(trial={"gpuNum": 0}),
        lambda c, _: _eq(c.config.training_services[0].trial_gpu_number, 0),
    ),
    ("trial.nasMode", _v1(trial={"nasMode": "classic_mode"}), _dropped("trial.nasMode")),
    (
        "localConfig.gpuIndices",
        _v1(localConfig={"gpuIndices": "1,2"}),
        lambda c, _: _eq(_local(c).gpu_indices, [1, 2]),
    ),
    (
        "localConfig.maxTrialNumPerGpu",
        _v1(localConfig={"maxTrialNumPerGpu": 2}, trial={"gpuNum": 1}),
        lambda c, _: _eq(_local(c).max_trial_number_per_gpu, 2),
    ),
    (
        "localConfig.useActiveGpu",
        _v1(localConfig={"useActiveGpu": True}),
        lambda c, _: _eq(_local(c).use_active_gpu, True),
    ),
    (
        "sharedStorage",
        _v1(
            sharedStorage={
                "storageType": "AzureBlob",
                "localMountPoint": "code",
                "remoteMountPoint": "/mnt/blob",
                "localMounted": "nnimount",
                "storageAccountName": "account",
                "storageAccountKey": "key",
                "containerName": "container",
            }
        ),
        _acted(
            "sharedStorage",
            lambda c: c.config.shared_storage and c.config.shared_storage.storage_type,
            "AzureBlob",
        ),
    ),
    ("machineList.ip", _v1_machine(), lambda c, _: _eq(_machine(c).host, "192.0.2.1")),
    ("machineList.port", _v1_machine(port=2222), lambda c, _: _eq(_machine(c).port, 2222)),
    ("machineList.username", _v1_machine(), lambda c, _: _eq(_machine(c).user, "u")),
    ("machineList.passwd", _v1_machine(), lambda c, _: _eq(_machine(c).password.get_secret_value(), "p")),
    (
        "machineList.sshKeyPath + passphrase",
        _v1_machine(passwd=None, sshKeyPath="~/.ssh/id_rsa", passphrase="pp"),
        lambda c, _: _eq(
            (_machine(c).ssh_key_file, _machine(c).ssh_passphrase.get_secret_value()),
            (Path.home().resolve() / ".ssh" / "id_rsa", "pp"),
        ),
    ),
    (
        "machineList.gpuIndices",
        _v1_machine(gpuIndices="0,1"),
        lambda c, _: _eq(_machine(c).gpu_indices, [0, 1]),
    ),
    (
        "machineList.maxTrialNumPerGpu",
        _v1_machine(maxTrialNumPerGpu=2) | {"trial": {**V1_BASE["trial"], "gpuNum": 1}},
        lambda c, _: _eq(_machine(c).max_trial_number_per_gpu, 2),
    ),
    (
        "machineList.useActiveGpu",
        _v1_machine(useActiveGpu=True),
        lambda c, _: _eq(_machine(c).use_active_gpu, True),
    ),
    (
        "machineList.pythonPath",
        _v1_machine(pythonPath="/opt/py/bin"),
        lambda c, _: _eq(_machine(c).python_path, "/opt/py/bin"),
    ),
    (
        "remoteConfig.reuse",
        _v1_machine() | {"remoteConfig": {"reuse": True}},
        _acted("trainingService.reuseMode", lambda c: c.config.training_services[0].reuse_mode, True),
    ),
]


@pytest.mark.parametrize(("data", "check"), [(d, c) for _, d, c in V1_KEYS], ids=[k for k, _, _ in V1_KEYS])
def test_v1_key(workdir: Path, data: dict[str, Any], check: Check) -> None:
    loaded = _load(workdir, data)
    assert loaded.converted_from_v1
    check(loaded, workdir)


# ---- platforms accepted but not available yet ----------------------------------------------------------

K8S_NFS = {"storageType": "nfs", "server": "10.0.0.3", "path": "/export"}
K8S_AZURE = {
    "storageType": "azureStorage",
    "azureAccount": "account",
    "azureShare": "share",
    "keyVaultName": "vault",
    "keyVaultKey": "key",
}
ROLE = {
    "replicas": 1,
    "command": "python3 trial.py",
    "gpuNumber": 0,
    "cpuNumber": 1,
    "memorySize": 1024,
    "dockerImage": "msranni/nni:latest",
    "codeDirectory": ".",
}
UNAVAILABLE: dict[str, dict[str, Any]] = {
    "openpai": {
        "platform": "openpai",
        "host": "https://pai.example.org",
        "username": "alice",
        "token": "t",
        "trialGpuNumber": 1,
        "trialCpuNumber": 2,
        "trialMemorySize": 4096,
        "storageConfigName": "nfs",
        "dockerImage": "msranni/nni:latest",
        "virtualCluster": "default",
        "localStorageMountPoint": "code",
        "containerStorageMountPoint": "/mnt/data",
        "reuseMode": True,
        "openpaiConfig": {"taskRoles": {"worker": {"commands": ["python3 trial.py"]}}},
    },
    "aml": {
        "platform": "aml",
        "subscriptionId": "sub",
        "resourceGroup": "rg",
        "workspaceName": "ws",
        "computeTarget": "gpu",
        "dockerImage": "msranni/nni:latest",
        "maxTrialNumberPerGpu": 1,
    },
    "dlc": {
        "platform": "dlc",
        "type": "Worker",
        "image": "registry/image:1",
        "jobType": "PyTorchJob",
        "podCount": 1,
        "ecsSpec": "ecs.gn6v",
        "region": "cn-hangzhou",
        "workspaceId": "ws",
        "nasDataSourceId": "nas",
        "ossDataSourceId": "oss",
        "accessKeyId": "id",
        "accessKeySecret": "secret",
        "localStorageMountPoint": "/mnt/nas",
        "containerStorageMountPoint": "/mnt/data",
    },
    "kubeflow": {
        "platform": "kubeflow",
        "operator": "pytorch-operator",
        "apiVersion": "v1",
        "storage": K8S_AZURE,
        "master": ROLE,
        "worker": ROLE | {"replicas": 2},
        "reuseMode": True,
        "namespace": "nni",
    },
    "frameworkcontroller": {
        "platform": "frameworkcontroller",
        "storage": K8S_NFS,
        "serviceAccountName": "frameworkcontroller",
        "taskRoles": [
            {
                "name": "worker",
                "dockerImage": "msranni/nni:latest",
                "taskNumber": 1,
                "command": "python3 trial.py",
                "gpuNumber": 0,
                "cpuNumber": 1,
                "memorySize": 1024,
                "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceedTaskCount": 1},
            }
        ],
        "reuseMode": True,
        "namespace": "default",
    },
}


def _keys(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {f"{prefix}{k}" for k in value} | {
            p for k, v in value.items() for p in _keys(v, f"{prefix}{k}.")
        }
    if isinstance(value, list):
        return {p for v in value for p in _keys(v, prefix)}
    return set()


# the other shapes of some blocks: a config file instead of an inline one, the other operator and storage
UNAVAILABLE["openpai with openpaiConfigFile"] = {
    key: value for key, value in UNAVAILABLE["openpai"].items() if key != "openpaiConfig"
} | {"openpaiConfigFile": "pai_job.yml"}  # written by the test: a job protocol with the block's task role
UNAVAILABLE["kubeflow tf-operator"] = {
    key: value for key, value in UNAVAILABLE["kubeflow"].items() if key != "master"
} | {"operator": "tf-operator", "storage": K8S_NFS, "ps": ROLE}
UNAVAILABLE["frameworkcontroller azureStorage"] = UNAVAILABLE["frameworkcontroller"] | {"storage": K8S_AZURE}


def _check_availability(config: ExperimentConfig, platform: str) -> None:
    """A platform whose service has landed starts past the availability check; the others are refused by name."""
    from trialfleet.startup import preflight
    from trialfleet.training_services.registry import get_platform

    if get_platform(platform).available:
        assert get_platform(platform).service_class is not None
        return
    with pytest.raises(PlatformNotAvailableError, match=f"platform '{platform}' is not available yet"):
        preflight(config)


@pytest.mark.parametrize("variant", sorted(UNAVAILABLE))
def test_cluster_platform_block_keeps_every_key(workdir: Path, variant: str) -> None:
    block = UNAVAILABLE[variant]
    if "openpaiConfigFile" in block:
        (workdir / block["openpaiConfigFile"]).write_text(json.dumps(UNAVAILABLE["openpai"]["openpaiConfig"]))
    loaded = _load(workdir, _top(_set(trainingService=block)))
    stored = loaded.config.to_json()["trainingService"]
    assert _keys(block) <= _keys(stored)  # every key kept (secrets as ******)
    _check_availability(loaded.config, block["platform"])


def test_aml_runs_in_reuse_mode_by_default_as_nni_did(workdir: Path) -> None:
    """NNI's AML ran only in reuse mode (its AmlConfig has no reuseMode key): trialfleet's default; the key set
    either way loads without a warning, and maxTrialNumberPerGpu is acted on in reuse mode with GPUs only."""
    default = _load(workdir, _top(_set(trainingService=UNAVAILABLE["aml"])))
    assert default.config.training_service.reuse_mode is True  # type: ignore[union-attr]
    for reuse in (True, False):
        loaded = _load(workdir, _top(_set(trainingService=UNAVAILABLE["aml"] | {"reuseMode": reuse})))
        assert not [w for w in loaded.warnings if "reuseMode" in w], loaded.warnings
    packed = UNAVAILABLE["aml"] | {"maxTrialNumberPerGpu": 2}
    _unacted("trainingService.maxTrialNumberPerGpu")(
        _load(workdir, _top(_set(trainingService=packed))), workdir
    )
    with_gpus = _load(workdir, _top(_set(trainingService=packed | {"trialGpuNumber": 1})))
    assert not [w for w in with_gpus.warnings if "maxTrialNumberPerGpu" in w], with_gpus.warnings
    one_job_each = packed | {"trialGpuNumber": 1, "reuseMode": False}
    _unacted("trainingService.maxTrialNumberPerGpu")(
        _load(workdir, _top(_set(trainingService=one_job_each))), workdir
    )


def test_hybrid_list_loads_every_member_and_passes_the_start_checks(workdir: Path) -> None:
    from trialfleet.startup import preflight

    loaded = _load(workdir, _top(_set(trainingService=[{"platform": "local"}, UNAVAILABLE["aml"]])))
    assert [s.platform for s in loaded.config.training_services] == ["local", "aml"]
    preflight(loaded.config)  # both platforms run: nothing refuses the list


V1_UNAVAILABLE = {
    "pai": {
        "paiConfig": {"userName": "alice", "token": "t", "host": "10.0.0.1"},
        "trial": {
            "gpuNum": 1,
            "cpuNum": 1,
            "memoryMB": 1024,
            "image": "msranni/nni:latest",
            "nniManagerNFSMountPath": "code",
            "containerNFSMountPath": "/mnt",
            "paiStorageConfigName": "nfs",
        },
    },
    "aml": {
        "amlConfig": {
            "subscriptionId": "s",
            "resourceGroup": "r",
            "workspaceName": "w",
            "computeTarget": "c",
            "maxTrialNumPerGpu": 1,
        },
        "trial": {"image": "msranni/nni:latest"},
    },
    "kubeflow": {
        "kubeflowConfig": {
            "operator": "tf-operator",
            "apiVersion": "v1",
            "storage": "nfs",
            "nfs": {"server": "10.0.0.3", "path": "/export"},
        },
        "trial": {
            "worker": {
                "replicas": 1,
                "command": "python3 trial.py",
                "gpuNum": 0,
                "cpuNum": 1,
                "memoryMB": 1024,
                "image": "msranni/nni:latest",
            }
        },
    },
    "frameworkcontroller": {
        "frameworkcontrollerConfig": {
            "serviceAccountName": "fc",
            "storage": "nfs",
            "nfs": {"server": "10.0.0.3", "path": "/export"},
        },
        "trial": {
            "taskRoles": [
                {
                    "name": "worker",
                    "taskNum": 1,
                    "command": "python3 trial.py",
                    "gpuNum": 0,
                    "cpuNum": 1,
                    "memoryMB": 1024,
                    "image": "msranni/nni:latest",
                    "frameworkAttemptCompletionPolicy": {"minFailedTaskCount": 1, "minSucceededTaskCount": 1},
                }
            ]
        },
    },
    "adl": {
        "trial": {
            "image": "registry/image:1",
            "namespace": "default",
            "adaptive": True,
            "cpuNum": 1,
            "memorySize": "1Gi",
            "checkpoint": {"storageClass": "nfs", "storageSize": "1Gi"},
        }
    },
}


@pytest.mark.parametrize("platform", sorted(V1_UNAVAILABLE))
def test_v1_cluster_platform_converts(workdir: Path, platform: str) -> None:
    data = _v1(trainingServicePlatform=platform, **V1_UNAVAILABLE[platform])
    loaded = _load(workdir, data)
    assert loaded.converted_from_v1
    assert not any("not converted" in w for w in loaded.warnings), loaded.warnings
    _check_availability(loaded.config, loaded.config.training_services[0].platform)


def test_platform_keys_match_the_experiment_config_json(workdir: Path) -> None:
    """The stored config (REST /experiment params) names every key as NNI's canonical JSON does."""
    loaded = _load(workdir, _top(_remote(port=2222, pythonPath="/opt/py/bin")))
    stored = loaded.config.to_json()
    assert stored["trainingService"]["machineList"][0] == {
        "host": "192.0.2.1",
        "port": 2222,
        "user": "alice",
        "password": "******",
        "useActiveGpu": False,
        "maxTrialNumberPerGpu": 1,
        "pythonPath": "/opt/py/bin",
        "acceptNewHostKeys": False,
    }
    assert isinstance(
        ExperimentConfig.from_json(loaded.config.to_json(include_secrets=True)), ExperimentConfig
    )
