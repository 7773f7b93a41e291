"""Legacy (v1) NNI configs → v2 dicts, key for key as NNI's ``nni/experiment/config/convert.py``.

Keys v2 has no place for are dropped with a warning, as NNI does. Deliberate differences: a machine's
``passphrase`` becomes ``sshPassphrase`` (NNI keeps the old name, which its own v2 schema then refuses), and
``adl`` and ``dlts`` configs convert to their platform's block so they load (NNI hands ``adl`` to a legacy launcher
and ran ``dlts`` only from v1 configs), and ``hybrid`` converts to a list of blocks (NNI refuses to convert it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trialfleet.config.base import SECRET_MASK
from trialfleet.config.units import show_value
from trialfleet.errors import ConfigError, ConfigProblem

_PLATFORMS = {"local": "local", "remote": "remote", "pai": "openpai", "aml": "aml", "adl": "adl"}
_PLATFORMS |= {"kubeflow": "kubeflow", "frameworkcontroller": "frameworkcontroller", "dlts": "dlts"}
#: ``dltsConfig`` keys as NNI wrote them, and those trialfleet adds (its storage, a fixed GPU type)
_DLTS = ("dashboard", "cluster", "team", "email", "password", "gpuType", "preemptionAllowed")
_DLTS_STORAGE = ("localStorageMountPoint", "containerStorageMountPoint")
_DROPPED = ("authorName", "description", "multiThread", "versionCheck", "logCollection")
_TOP_LEVEL = {
    "experimentName": "experimentName",
    "searchSpacePath": "searchSpaceFile",
    "trialConcurrency": "trialConcurrency",
    "maxExecDuration": "maxExperimentDuration",
    "maxTrialDuration": "maxTrialDuration",
    "maxTrialNum": "maxTrialNumber",
    "nniManagerIp": "nniManagerIp",
    "logDir": "experimentWorkingDirectory",
    "debug": "debug",
    "logLevel": "logLevel",
    "useAnnotation": "useAnnotation",
}
_TRIAL = {"command": "trialCommand", "codeDir": "trialCodeDirectory", "gpuNum": "trialGpuNumber"}
_MACHINE = {
    "ip": "host",
    "port": "port",
    "username": "user",
    "passwd": "password",
    "sshKeyPath": "sshKeyFile",
    "passphrase": "sshPassphrase",
    "gpuIndices": "gpuIndices",
    "maxTrialNumPerGpu": "maxTrialNumberPerGpu",
    "useActiveGpu": "useActiveGpu",
    "pythonPath": "pythonPath",
}
_ROLE = {"command": "command", "gpuNum": "gpuNumber", "cpuNum": "cpuNumber", "memoryMB": "memorySize"}
_ROLE |= {"image": "dockerImage", "replicas": "replicas", "name": "name", "taskNum": "taskNumber"}
# NNI's converter dropped it; trialfleet acts on it (an image pull secret per role)
_ROLE |= {"privateRegistryAuthPath": "privateRegistryAuthPath"}
# v2 key order of the converted config, so the printed YAML reads like a hand-written one
_ORDER = ("experimentName", "searchSpaceFile", *_TRIAL.values(), "trialConcurrency", "maxExperimentDuration")
_ORDER += ("maxTrialDuration", "maxTrialNumber", "nniManagerIp", "experimentWorkingDirectory", "debug")
_ORDER += (
    "logLevel",
    "useAnnotation",
    "tunerGpuIndices",
    "tuner",
    "assessor",
    "trainingService",
    "sharedStorage",
)


#: the v2 keys of a converted config that hold a secret (a machine's password and passphrase, OpenPAI's token,
#: DLTS's password): masked wherever the converted form is shown, as the stored config masks them
SECRET_KEYS = frozenset({"password", "sshPassphrase", "token"})
#: platforms NNI only ever ran from v1 configs: their converted form is trialfleet's, not one NNI would read
_NO_NNI_V2 = frozenset({"adl", "dlts"})


@dataclass(frozen=True)
class V1Conversion:
    """A legacy v1 config converted: the v2 dict, a warning per dropped key, and the key paths the conversion
    wrote without the user having written them (so that no warning about them is given)."""

    v2: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    added: frozenset[str] = frozenset()

    @property
    def platforms(self) -> list[str]:
        services = self.v2.get("trainingService")
        blocks = services if isinstance(services, list) else [services]
        return [str(block.get("platform")) for block in blocks if isinstance(block, Mapping)]

    @property
    def nni_has_v2_form(self) -> bool:
        """False for a platform NNI ran only from v1 configs (adl, dlts): there is no NNI v2 file to update to."""
        return not _NO_NNI_V2.intersection(self.platforms)

    def shown(self) -> str:
        """The v2 form as YAML to show the user: secrets masked, no line folded (it must parse back)."""
        return yaml.safe_dump(_masked(self.v2), sort_keys=False, allow_unicode=True, width=float("inf"))


def _masked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: SECRET_MASK if key in SECRET_KEYS and item is not None else _masked(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def is_v1_config(data: Mapping[str, Any]) -> bool:
    """NNI's own test (``trainingServicePlatform``), plus the v1-only ``authorName`` and ``trial:`` block."""
    return "trainingServicePlatform" in data or "authorName" in data or isinstance(data.get("trial"), Mapping)


def convert_v1_to_v2(
    v1: Mapping[str, Any], *, source: str | Path | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The v2 dict for a legacy v1 config, and a warning per key that had to be dropped."""
    conversion = convert_v1(v1, source=source)
    return conversion.v2, conversion.warnings


def convert_v1(v1: Mapping[str, Any], *, source: str | Path | None = None) -> V1Conversion:
    """A legacy v1 config converted (:class:`V1Conversion`); a :class:`ConfigError` naming what cannot be."""
    converter = _Converter(v1)
    v2 = converter.run()
    if converter.problems:
        raise ConfigError("cannot convert the legacy v1 config", file=source, problems=converter.problems)
    return V1Conversion(v2, converter.warnings, frozenset(converter.added))


def _where(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


class _Converter:
    def __init__(self, v1: Mapping[str, Any]) -> None:
        self.rest = dict(v1)
        self.v2: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.problems: list[ConfigProblem] = []
        self.added: set[str] = set()  # key paths written by the conversion, not by the user

    def problem(self, where: str, message: str) -> None:
        self.problems.append(ConfigProblem(where, message))

    def section(self, parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
        """Pop ``parent[key]`` as a mapping (empty when absent)."""
        value = parent.pop(key, None)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(_where(where, key), f"expected a mapping, got {show_value(value)}")
            return {}
        return dict(value)

    def move(self, src: dict[str, Any], dst: dict[str, Any], renames: Mapping[str, str]) -> None:
        for old, new in renames.items():
            value = src.pop(old, None)
            if value is not None:
                dst[new] = value

    def drop(self, src: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
        for key in keys:
            if key in src:
                del src[key]
                self.warnings.append(f"{_where(where, key)} is not used by v2 configs and was dropped")

    def leftover(self, src: dict[str, Any], where: str) -> None:
        if src:
            keys = ", ".join(str(k) for k in src)
            self.warnings.append(f"{where or 'top level'}: not converted (no v2 equivalent): {keys}")

    def run(self) -> dict[str, Any]:
        platform = self.rest.pop("trainingServicePlatform", None)
        if self.rest.pop("multiPhase", None):
            self.problem("multiPhase", "multi-phase experiments are not supported (NNI dropped them in v2)")
        if platform != "hybrid" and (not isinstance(platform, str) or platform not in _PLATFORMS):
            if platform is None:
                message = "required field is missing (a legacy v1 config names its platform here)"
            else:
                message = f"expected one of {', '.join(_PLATFORMS)} or hybrid, got {show_value(platform)}"
            self.problem("trainingServicePlatform", message)
            return {}
        self.drop(self.rest, _DROPPED, "")
        self.move(self.rest, self.v2, _TOP_LEVEL)
        trial = self.section(self.rest, "trial", "")
        self.move(trial, self.v2, _TRIAL)
        self.drop(trial, ("nasMode",), "trial")
        self._algorithms()
        if platform == "hybrid":
            self.v2["trainingService"] = self._hybrid(trial)
        else:
            self.v2["trainingService"] = self._service(platform, trial)
        shared = self.section(self.rest, "sharedStorage", "")
        if shared:
            self.v2["sharedStorage"] = shared
        self.leftover(trial, "trial")
        self.leftover(self.rest, "")
        return {key: self.v2[key] for key in _ORDER if key in self.v2}

    def _service(self, platform: str, trial: dict[str, Any]) -> dict[str, Any]:
        service: dict[str, Any] = {"platform": _PLATFORMS[platform]}
        getattr(self, f"_{platform}")(trial, service)
        return service

    def _hybrid(self, trial: dict[str, Any]) -> list[dict[str, Any]]:
        """``hybridConfig.trainingServicePlatforms`` → a list of blocks, each converted from its own v1 section
        (``localConfig``, ``machineList`` …); the ``trial`` keys any of them takes are taken once."""
        hybrid = self.section(self.rest, "hybridConfig", "")
        names = hybrid.pop("trainingServicePlatforms", None)
        self.leftover(hybrid, "hybridConfig")
        where = "hybridConfig.trainingServicePlatforms"
        if not isinstance(names, list) or not names:
            self.problem(where, f"expected a list of platforms, got {show_value(names)}")
            return []
        services, taken = [], set()
        for index, name in enumerate(names):
            if not isinstance(name, str) or name not in _PLATFORMS:
                expected = ", ".join(_PLATFORMS)
                self.problem(f"{where}[{index}]", f"expected one of {expected}, got {show_value(name)}")
            elif name in names[:index]:
                self.problem(f"{where}[{index}]", f"{name} is listed twice")
            else:
                own = dict(trial)
                services.append(self._service(name, own))
                taken |= set(trial) - set(own)
        for key in taken:
            del trial[key]
        return services

    def _algorithms(self) -> None:
        for kind in ("tuner", "assessor", "advisor"):
            v1_algo = self.section(self.rest, kind, "")
            if not v1_algo:
                continue
            target = "tuner" if kind == "advisor" else kind
            if target in self.v2:
                self.problem(kind, "a v1 config sets either tuner or advisor, not both")
            self.v2[target] = self._algorithm(kind, v1_algo)
            self.drop(v1_algo, ("includeIntermediateResults",), kind)
            self.move(v1_algo, self.v2, {"gpuIndices": "tunerGpuIndices"})
            self.leftover(v1_algo, kind)

    def _algorithm(self, kind: str, v1_algo: dict[str, Any]) -> dict[str, Any]:
        algo: dict[str, Any] = {}
        name = v1_algo.pop(f"builtin{kind.title()}Name", None)
        if name is not None:
            algo["name"] = name
        else:
            file_name, class_name = v1_algo.pop("classFileName", None), v1_algo.pop("className", None)
            if not (isinstance(file_name, str) and file_name.endswith(".py") and isinstance(class_name, str)):
                expected = f"builtin{kind.title()}Name, or codeDir + classFileName (a .py file) + className"
                self.problem(kind, f"expected {expected}")
                return algo
            algo["className"] = f"{file_name[:-3].replace('/', '.')}.{class_name}"
            self.move(v1_algo, algo, {"codeDir": "codeDirectory"})
        self.move(v1_algo, algo, {"classArgs": "classArgs"})
        return algo

    def _local(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        local = self.section(self.rest, "localConfig", "")
        renames = {"gpuIndices": "gpuIndices", "maxTrialNumPerGpu": "maxTrialNumberPerGpu"}
        self.move(local, service, renames | {"useActiveGpu": "useActiveGpu"})
        self.leftover(local, "localConfig")

    def _remote(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        remote = self.section(self.rest, "remoteConfig", "")
        self.move(remote, service, {"reuse": "reuseMode"})
        self.leftover(remote, "remoteConfig")
        machines = self.rest.pop("machineList", None)
        if not isinstance(machines, list):
            self.problem("machineList", f"expected a list of machines, got {show_value(machines)}")
            return
        service["machineList"] = []
        for index, v1_machine in enumerate(machines):
            if not isinstance(v1_machine, Mapping):
                self.problem(f"machineList[{index}]", f"expected a mapping, got {show_value(v1_machine)}")
                continue
            machine: dict[str, Any] = {}
            rest = dict(v1_machine)
            self.move(rest, machine, _MACHINE)
            self.leftover(rest, f"machineList[{index}]")
            service["machineList"].append(machine)

    def _pai(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        # NNI's order: the trial's keys, then paiConfig's, whose cpuNum and memoryMB win when both set them
        self.move(trial, service, {"nniManagerNFSMountPath": "localStorageMountPoint"})
        self.move(trial, service, {"containerNFSMountPath": "containerStorageMountPoint"})
        self.move(trial, service, {"cpuNum": "trialCpuNumber", "memoryMB": "trialMemorySize"})
        self.move(trial, service, {"image": "dockerImage", "virtualCluster": "virtualCluster"})
        self.move(trial, service, {"paiStorageConfigName": "storageConfigName"})
        self.move(trial, service, {"paiConfigPath": "openpaiConfigFile"})
        pai = self.section(self.rest, "paiConfig", "")
        self.move(pai, service, {"userName": "username", "token": "token", "host": "host"})
        self.move(pai, service, {"reuse": "reuseMode", "gpuNum": "trialGpuNumber"})
        self.move(pai, service, {"cpuNum": "trialCpuNumber", "memoryMB": "trialMemorySize"})
        self.drop(pai, ("passWord", "password", "maxTrialNumPerGpu", "useActiveGpu"), "paiConfig")
        self.leftover(pai, "paiConfig")

    def _aml(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        self.move(trial, service, {"image": "dockerImage"})
        aml = self.section(self.rest, "amlConfig", "")
        renames = {key: key for key in ("subscriptionId", "resourceGroup", "workspaceName", "computeTarget")}
        renames |= {
            key: key for key in ("cloud", "cloudMetadata", "disableInstanceDiscovery")
        }  # trialfleet's
        self.move(aml, service, renames | {"maxTrialNumPerGpu": "maxTrialNumberPerGpu"})
        self.drop(aml, ("useActiveGpu",), "amlConfig")
        self.leftover(aml, "amlConfig")

    def _dlts(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        self.move(trial, service, {"image": "image"})
        dlts = self.section(self.rest, "dltsConfig", "")
        self.move(dlts, service, {key: key for key in (*_DLTS, *_DLTS_STORAGE)})
        self.leftover(dlts, "dltsConfig")

    def _kubeflow(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        config = self.section(self.rest, "kubeflowConfig", "")
        self.move(config, service, {"operator": "operator", "apiVersion": "apiVersion"})
        self._kubernetes(config, service, "kubeflowConfig")
        for role_name in ("ps", "master", "worker"):
            role = self.section(trial, role_name, "trial")
            if role:
                service[role_name] = self._role(role, f"trial.{role_name}")
                # as NNI's converter: its v2 schema wants one per role; trialfleet runs trialCodeDirectory
                service[role_name]["codeDirectory"] = self.v2.get("trialCodeDirectory", ".")
                self.added.add(f"trainingService.{role_name}.codeDirectory")

    def _frameworkcontroller(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        config = self.section(self.rest, "frameworkcontrollerConfig", "")
        self.move(config, service, {"serviceAccountName": "serviceAccountName"})
        self._kubernetes(config, service, "frameworkcontrollerConfig")
        roles = trial.pop("taskRoles", None)
        if not isinstance(roles, list):
            self.problem("trial.taskRoles", f"expected a list of task roles, got {show_value(roles)}")
            return
        service["taskRoles"] = [self._role(role, f"trial.taskRoles[{i}]") for i, role in enumerate(roles)]
        first_command = next((r.get("command") for r in service["taskRoles"] if r.get("command")), None)
        if "trialCommand" not in self.v2 and first_command is not None:
            self.v2["trialCommand"] = first_command

    def _kubernetes(self, config: dict[str, Any], service: dict[str, Any], where: str) -> None:
        """Fields kubeflowConfig and frameworkcontrollerConfig share, with their storage block."""
        self.move(config, service, {"reuse": "reuseMode", "namespace": "namespace"})
        self.drop(config, ("uploadRetryCount",), where)
        kind = config.pop("storage", None)
        nfs = self.section(config, "nfs", where)
        vault, azure = self.section(config, "keyVault", where), self.section(config, "azureStorage", where)
        storage: dict[str, Any] = {}
        if kind == "azureStorage" or (kind is None and azure):
            storage["storageType"] = "azureStorage"
            self.move(azure, storage, {"accountName": "azureAccount", "azureShare": "azureShare"})
            self.move(vault, storage, {"vaultName": "keyVaultName", "name": "keyVaultKey"})
        elif kind is None or kind == "nfs":
            storage["storageType"] = "nfs"
            self.move(nfs, storage, {"server": "server", "path": "path"})
        else:
            message = (
                f"{show_value(kind)} storage cannot be converted: give a v2 config with "
                "storage: {storageType: pvc, claimName, localMountPoint}"
            )
            self.problem(f"{where}.storage", message)
        if storage:
            # trialfleet's: where this machine mounts the export or share (NNI's v1 had no key for it and
            # mounted it at its own path), in the storage's block or beside it
            for block in (nfs, azure, config):
                self.move(block, storage, {"localMountPoint": "localMountPoint"})
        service["storage"] = storage
        for block, name in ((nfs, "nfs"), (vault, "keyVault"), (azure, "azureStorage")):
            self.leftover(block, f"{where}.{name}")
        self.leftover(config, where)

    def _role(self, role: Any, where: str) -> dict[str, Any]:
        if not isinstance(role, Mapping):
            self.problem(where, f"expected a mapping, got {show_value(role)}")
            return {}
        rest, converted = dict(role), dict[str, Any]()
        self.move(rest, converted, _ROLE)
        for old_name in ("frameworkAttemptCompletionPolicy", "frameworkControllerCompletionPolicy"):
            policy = self.section(rest, old_name, where)
            if policy:
                renames = {
                    "minFailedTaskCount": "minFailedTaskCount",
                    "minSucceededTaskCount": "minSucceedTaskCount",
                }
                converted["frameworkAttemptCompletionPolicy"] = {}
                self.move(policy, converted["frameworkAttemptCompletionPolicy"], renames)
                self.leftover(policy, _where(where, old_name))
        self.leftover(rest, where)
        return converted

    def _adl(self, trial: dict[str, Any], service: dict[str, Any]) -> None:
        keys = ("namespace", "adaptive", "image", "imagePullSecrets", "nfs", "checkpoint", "memorySize")
        self.move(trial, service, {key: key for key in keys} | {"cpuNum": "cpuNumber"})
