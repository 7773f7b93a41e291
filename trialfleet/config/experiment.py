"""``ExperimentConfig``: NNI's v2 experiment config, plus trialfleet's ``maxTrialRetries``.

Build it with :meth:`ExperimentConfig.from_dict` (a parsed YAML), :func:`trialfleet.config.load_config`
(a file), :meth:`ExperimentConfig.for_platform` (Python) or :meth:`ExperimentConfig.from_json` (a stored
config); each raises :class:`~trialfleet.errors.ConfigError` naming every problem. Attributes may be changed
afterwards but are not re-validated; :meth:`to_json` → :meth:`from_json` re-validates.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import MinLen
from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.base import (
    BuildSettings,
    ConfigModel,
    ConfigPath,
    Duration,
    GpuIndices,
    JsonMapping,
    KeyPath,
    build_settings,
    existing,
    raise_problems,
)
from trialfleet.config.cluster_services import (
    AdlConfig,
    AmlConfig,
    DlcConfig,
    DltsConfig,
    FrameworkControllerConfig,
    KubeflowConfig,
    OpenpaiConfig,
)
from trialfleet.config.files import read_search_space
from trialfleet.config.keys import fields_of, fold
from trialfleet.config.pipeline import build_model
from trialfleet.config.shared_storage import SharedStorageConfig
from trialfleet.config.training_services import LocalConfig, RemoteConfig, SlurmConfig
from trialfleet.errors import ConfigError

TrainingServiceConfig = Annotated[
    LocalConfig
    | RemoteConfig
    | SlurmConfig
    | OpenpaiConfig
    | AmlConfig
    | DlcConfig
    | KubeflowConfig
    | FrameworkControllerConfig
    | AdlConfig
    | DltsConfig,
    Field(discriminator="platform"),
]

_SERVICE_CLASSES: tuple[type[ConfigModel], ...] = (LocalConfig, RemoteConfig, SlurmConfig, OpenpaiConfig)
_SERVICE_CLASSES += (AmlConfig, DlcConfig, KubeflowConfig, FrameworkControllerConfig, AdlConfig, DltsConfig)
PLATFORM_CLASSES: dict[str, type[ConfigModel]] = {
    cls.model_fields["platform"].default: cls for cls in _SERVICE_CLASSES
}

# A list of services is a hybrid experiment. The callable discriminator keeps pydantic from reporting
# every single-service error a second time as "not a list".
_SERVICE_SHAPES = ("single", "list")
_TrainingServiceField = Annotated[
    Annotated[TrainingServiceConfig, Tag("single")]
    | Annotated[list[TrainingServiceConfig], MinLen(1), Tag("list")],
    Discriminator(lambda value: "list" if isinstance(value, list) else "single"),
]

#: copied into the training-service block(s) when unset there
SHORTCUT_FIELDS = ("trialCommand", "trialCodeDirectory", "trialGpuNumber", "nniManagerIp", "debug")

LogLevel = Literal["fatal", "error", "warning", "info", "debug", "trace"]


class ExperimentConfig(ConfigModel):
    experiment_name: str | None = None
    experiment_type: Literal["hpo"] = "hpo"
    search_space_file: ConfigPath | None = None
    search_space: JsonMapping | None = None  # loaded from search_space_file when that is given
    trial_command: str | None = None
    trial_code_directory: ConfigPath = Field(default=Path("."), validate_default=True)
    trial_concurrency: int = Field(gt=0)
    trial_gpu_number: int | None = Field(default=None, ge=0)
    max_experiment_duration: Duration | None = Field(default=None, gt=0)  # seconds
    max_trial_number: int | None = Field(default=None, gt=0)
    max_trial_duration: Duration | None = Field(default=None, gt=0)  # seconds
    max_trial_retries: int = Field(default=0, ge=0)  # trialfleet: re-run a trial lost to infrastructure
    nni_manager_ip: str | None = None
    use_annotation: bool = False
    debug: bool = False
    log_level: LogLevel = "info"  # "debug" when debug is true and logLevel is unset
    experiment_working_directory: ConfigPath = Field(
        default=Path("~/trialfleet-experiments"), validate_default=True
    )
    tuner_gpu_indices: GpuIndices = None
    tuner: AlgorithmConfig
    assessor: AlgorithmConfig | None = None
    advisor: AlgorithmConfig | None = None  # deprecated: always moved into tuner, so None once built
    training_service: _TrainingServiceField
    shared_storage: SharedStorageConfig | None = None

    @property
    def training_services(self) -> list[TrainingServiceConfig]:
        """The training-service blocks, as a list even when there is one (not hybrid)."""
        services = self.training_service
        return list(services) if isinstance(services, list) else [services]

    @field_validator("search_space_file")
    @classmethod
    def _search_space_file_exists(cls, path: Path | None, info: ValidationInfo) -> Path | None:
        if build_settings(info).trust_stored:
            return path  # the stored search space is used; the file may have moved since
        return existing("file", "search space file")(path, info)

    @field_validator("use_annotation")
    @classmethod
    def _refuse_annotation(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "useAnnotation is not supported (NNI dropped it in v3.0): "
                "give the search space in searchSpace or searchSpaceFile"
            )
        return value

    @model_validator(mode="after")
    def _canonicalise(self, info: ValidationInfo) -> ExperimentConfig:
        if "log_level" not in self.model_fields_set and self.debug:
            self.log_level = "debug"
        raise_problems(self._load_search_space(build_settings(info)))
        return self

    def _load_search_space(self, settings: BuildSettings) -> list[tuple[KeyPath, str]]:
        if settings.trust_stored and self.search_space is not None:
            return []  # a stored config keeps the space the experiment ran with
        if self.search_space_file is None:
            if self.search_space is None:
                return [(("searchSpaceFile",), "required field is missing (or give searchSpace inline)")]
            return []
        if self.search_space is not None:
            return [(("searchSpace",), "set either searchSpace or searchSpaceFile, not both")]
        try:
            self.search_space = read_search_space(self.search_space_file)
        except ValueError as exc:
            return [(("searchSpaceFile",), str(exc))]
        return []

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], base_dir: str | Path | None = None, source: str | Path | None = None
    ) -> ExperimentConfig:
        """Build from a parsed v2 config. Relative paths are taken from ``base_dir`` (default: CWD)."""
        base = Path(os.path.expanduser(base_dir)).resolve() if base_dir is not None else Path.cwd()
        return build_experiment_config(data, BuildSettings(base_dir=base), source=source)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, check_paths: bool = True) -> ExperimentConfig:
        """Rebuild a config saved with :meth:`to_json`; its search space is kept, not re-read from the file.

        ``check_paths=False`` allows viewing an experiment whose code directory has since been removed.
        """
        settings = BuildSettings(base_dir=Path.cwd(), check_paths=check_paths, trust_stored=True)
        return build_experiment_config(data, settings, source="<stored config>")

    @classmethod
    def for_platform(cls, platform: str, **fields: Any) -> ExperimentConfig:
        """Build in Python, as NNI's ``ExperimentConfig('local')``: keyword arguments that are fields of the
        platform's block go there, all others to the top level.

        ``ExperimentConfig.for_platform('local', trial_command='python trial.py', trial_concurrency=2,
        search_space={...}, tuner={'name': 'TPE'})``
        """
        service_class = PLATFORM_CLASSES.get(platform)
        if service_class is None:
            known = ", ".join(PLATFORM_CLASSES)
            raise ConfigError(f"unknown platform {platform!r}; expected one of {known}", key_path="platform")
        if any(fold(name) == "trainingservice" for name in fields):
            raise ConfigError("for_platform builds trainingService itself; pass its fields as keywords")
        top: dict[str, Any] = {"trainingService": {"platform": platform}}
        for name, value in fields.items():
            in_top, in_service = fold(name) in fields_of(cls), fold(name) in fields_of(service_class)
            (top["trainingService"] if in_service and not in_top else top)[name] = value
        return cls.from_dict(top)

    def to_json(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """The canonical config: camelCase keys, unset (None) fields dropped, paths as strings, secrets
        shown as ``******`` unless ``include_secrets``. This is what is stored and served over REST."""
        context = {"include_secrets": include_secrets}
        dumped: dict[str, Any] = self.model_dump(
            mode="json", by_alias=True, exclude_none=True, context=context
        )
        return dumped


def _prepare(data: dict[str, Any], settings: BuildSettings) -> list[tuple[KeyPath, str]]:
    """Move ``advisor`` into ``tuner`` and copy the shortcut fields into the training-service block(s)."""
    problems: list[tuple[KeyPath, str]] = []
    advisor = data.pop("advisor", None)
    if advisor is not None and data.get("tuner") is not None:
        problems.append((("advisor",), "advisor is deprecated and cannot be set together with tuner"))
    elif advisor is not None:
        data["tuner"] = advisor
        settings.aliases[("tuner",)] = ("advisor",)
        settings.warnings.append("advisor is deprecated; it is used as the tuner (rename the key to tuner)")
    services = data.get("trainingService")
    members = list(enumerate(services)) if isinstance(services, list) else [(None, services)]
    for index, member in members:
        if not isinstance(member, dict):
            continue
        prefix: KeyPath = ("trainingService",) if index is None else ("trainingService", index)
        for key in SHORTCUT_FIELDS:
            if member.get(key) is None:
                member.pop(key, None)
                if data.get(key) is not None:
                    member[key] = data[key]
                settings.aliases[(*prefix, key)] = (key,)
    return problems


def build_experiment_config(
    data: Any, settings: BuildSettings, *, source: str | Path | None = None
) -> ExperimentConfig:
    """The one path every ExperimentConfig is built through (warnings land in ``settings.warnings``)."""
    return build_model(
        ExperimentConfig, data, settings, source=source, prepare=_prepare, extra_tags=_SERVICE_SHAPES
    )
