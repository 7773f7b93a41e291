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
from typing import Annotated, Any, ClassVar, Literal

from annotated_types import MinLen
from pydantic import (
    Discriminator,
    Field,
    SerializeAsAny,
    Tag,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from trialfleet.config.algorithm import AlgorithmConfig
from trialfleet.config.base import (
    MAX_TRIAL_GPUS,
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
from trialfleet.config.credentials import mask_config
from trialfleet.config.files import read_search_space, search_space_size_problem
from trialfleet.config.fleet import merge_fleet_file
from trialfleet.config.keys import ModelChoice, fields_of, fold
from trialfleet.config.pipeline import build_model
from trialfleet.config.service import TrainingServiceConfig
from trialfleet.config.shared_storage import SharedStorageConfig
from trialfleet.config.units import show_value
from trialfleet.errors import ConfigError, PlatformNotAvailableError
from trialfleet.layout import default_working_directory


def _platform_name(data: Mapping[Any, Any]) -> Any:
    return next((v for k, v in data.items() if isinstance(k, str) and fold(k) == "platform"), None)


def platform_config_class(data: Mapping[Any, Any]) -> type[TrainingServiceConfig] | None:
    """The config model of the platform a ``trainingService`` mapping names (None when it names none)."""
    from trialfleet.training_services.registry import get_platform

    name = _platform_name(data)
    if not isinstance(name, str):
        return None
    try:
        return get_platform(name).config_class()
    except PlatformNotAvailableError:
        return None


def _known_platform_configs() -> list[type[TrainingServiceConfig]]:
    from trialfleet.training_services.registry import platforms

    known = []
    for platform in platforms().values():
        try:
            known.append(platform.config_class())
        except PlatformNotAvailableError:
            continue  # a plugin that cannot load: reported when a config names it
    return known


def _validate_platform(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """Second pass of ``trainingService``: validate a block with the model of the platform it names."""
    if not isinstance(value, Mapping):
        return handler(value)  # a model built in Python, or the type error pydantic reports
    name = _platform_name(value)
    if name is None:
        raise_problems([(("platform",), "required field is missing")])
    if not isinstance(name, str):
        raise_problems([(("platform",), f"expected a platform name, got {show_value(name)}")])
    from trialfleet.training_services.registry import get_platform

    try:
        model = get_platform(name).config_class()
    except PlatformNotAvailableError as exc:
        raise_problems([(("platform",), str(exc))])
    return model.model_validate(value, context=info.context)


#: one training-service block, validated in two passes: ``platform`` names the model (built-in or plugin)
TrainingServiceField = Annotated[
    SerializeAsAny[TrainingServiceConfig],
    WrapValidator(_validate_platform),
    ModelChoice(platform_config_class, _known_platform_configs),
]

# A list of services is a hybrid experiment. The callable discriminator keeps pydantic from reporting
# every single-service error a second time as "not a list".
_SERVICE_SHAPES = ("single", "list")
_TrainingServiceField = Annotated[
    Annotated[TrainingServiceField, Tag("single")]
    | Annotated[list[TrainingServiceField], MinLen(1), Tag("list")],
    Discriminator(lambda value: "list" if isinstance(value, list) else "single"),
]

#: trials running at once: the scheduler asks the tuner for that many in one step and the platform starts them
MAX_TRIAL_CONCURRENCY = 10_000
#: trials of one experiment (maxTrialNumber): far beyond any tuning budget
MAX_TRIAL_NUMBER = 1_000_000
#: re-runs of a trial lost to infrastructure (maxTrialRetries)
MAX_TRIAL_RETRIES = 100

#: what a running experiment may change (NNI's profile updates)
UPDATABLE = frozenset({"trial_concurrency", "max_trial_number", "max_experiment_duration", "search_space"})

#: copied into the training-service block(s) when unset there
SHORTCUT_FIELDS = ("trialCommand", "trialCodeDirectory", "trialGpuNumber", "nniManagerIp", "debug")

LogLevel = Literal["fatal", "error", "warning", "info", "debug", "trace"]


class ExperimentConfig(ConfigModel):
    experiment_name: str | None = None
    """A name shown by `experiment list`, the web UI and the manifest; need not be unique."""
    experiment_type: Literal["hpo"] = "hpo"
    """Only hyper-parameter optimisation (`hpo`); NNI's `nas` is not offered."""
    search_space_file: ConfigPath | None = None
    """A JSON (or YAML) file holding the search space, relative to the config file. Give this or
    `searchSpace`."""
    search_space: JsonMapping | None = None  # loaded from search_space_file when that is given
    """The search space inline: parameter name → `{_type, _value}`, NNI's format ([tuners](../tuners.md))."""
    trial_command: str | None = None
    """The command that runs one trial, in `trialCodeDirectory` (by `bash -c` on Linux); copied into the
    platform block when unset there."""
    trial_code_directory: ConfigPath = Field(default=Path("."), validate_default=True)
    """The trial's code, relative to the config file; uploaded or shared by the platform (`.nniignore`
    honoured)."""
    trial_concurrency: int = Field(gt=0, le=MAX_TRIAL_CONCURRENCY)
    """How many trials run at once."""
    trial_gpu_number: int | None = Field(default=None, ge=0, le=MAX_TRIAL_GPUS)
    """GPUs each trial gets, chosen by the platform (`CUDA_VISIBLE_DEVICES`). Unset: no GPU scheduling."""
    max_experiment_duration: Duration | None = Field(default=None, gt=0)  # seconds, at most ten years
    """The experiment stops submitting trials after this long and is DONE once they end."""
    max_trial_number: int | None = Field(default=None, gt=0, le=MAX_TRIAL_NUMBER)
    """Trials to run in all; unset: until the duration or the search space runs out."""
    max_trial_duration: Duration | None = Field(default=None, gt=0)  # seconds, at most ten years
    """A trial running longer is stopped (EARLY_STOPPED, as NNI does)."""
    # trialfleet: re-run a trial lost to infrastructure
    max_trial_retries: int = Field(default=0, ge=0, le=MAX_TRIAL_RETRIES)
    """Re-runs (same parameters) of a trial that failed for an infrastructure reason (lost host, preempted
    job, evicted pod); 0: none."""
    nni_manager_ip: str | None = None
    """The address trials use to reach the manager, on platforms whose trials connect back to it."""
    use_annotation: bool = False
    """NNI's annotation mode, dropped in NNI 3.0: `true` is refused."""
    debug: bool = False
    """The manager logs at debug level (and `logLevel` defaults to `debug`)."""
    log_level: LogLevel = "info"  # "debug" when debug is true and logLevel is unset
    """The manager's log level (`log/manager.log`)."""
    # ~/trialfleet-experiments, or NNI's ~/nni-experiments with TRIALFLEET_LAYOUT=nni (trialfleet/layout.py)
    experiment_working_directory: ConfigPath = Field(
        default_factory=default_working_directory, validate_default=True
    )
    """Where each experiment gets its directory (`<this>/<experiment id>/`); `~/nni-experiments` when
    `TRIALFLEET_LAYOUT=nni` is set."""
    tuner_gpu_indices: GpuIndices = None
    """GPUs the tuner may use (NNI's dispatcher setting)."""
    tuner: AlgorithmConfig
    """The algorithm that proposes parameters: a built-in `name` or a custom `className`."""
    assessor: AlgorithmConfig | None = None
    """An algorithm that stops unpromising trials early from their intermediate results (Medianstop,
    Curvefitting or custom)."""
    advisor: AlgorithmConfig | None = None  # deprecated: always moved into tuner, so None once built
    """NNI's older name for a tuner that also assesses; moved into `tuner` with a warning."""
    training_service: _TrainingServiceField
    """Where trials run: one platform block, or a list of them (a hybrid experiment,
    [hybrid](../hybrid.md))."""
    shared_storage: SharedStorageConfig | None = None
    """An NFS export or Azure Blob container mounted on the manager and every worker; trials read the code
    from it ([shared storage](../shared-storage.md))."""

    trialfleet_keys: ClassVar[frozenset[str]] = frozenset({"max_trial_retries"})
    not_acted_on: ClassVar[dict[str, str]] = {
        "tuner_gpu_indices": "the tuner runs in the manager's process, which does not restrict its GPUs",
    }

    def not_acted_on_here(self) -> dict[str, str]:
        """Keys not acted on by this config's platforms (read with ``not_acted_on``)."""
        others = sorted({s.platform for s in self.training_services if not s.uses_shared_storage})
        if self.shared_storage is None or not others:
            return {}
        why = f"{', '.join(others)} trials get the code directory the way their platform ships it"
        return {"shared_storage": why + " (shared storage is used by local, remote and slurm)"}

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
        raise_problems(self._load_search_space(build_settings(info)) + self._check_hybrid())
        return self

    def _check_hybrid(self) -> list[tuple[KeyPath, str]]:
        """A hybrid experiment's trials are stored with their platform's name: each platform appears once."""
        if not isinstance(self.training_service, list):
            return []
        problems: list[tuple[KeyPath, str]] = []
        first: dict[str, int] = {}
        for index, block in enumerate(self.training_service):
            if block.platform in first:
                where = f"trainingService[{first[block.platform]}]"
                message = (
                    f"{block.platform} is already {where}: put all of its machines or options in one block"
                )
                problems.append((("trainingService", index, "platform"), message))
            first.setdefault(block.platform, index)
        return problems

    def _load_search_space(self, settings: BuildSettings) -> list[tuple[KeyPath, str]]:
        if settings.trust_stored and self.search_space is not None:
            return []  # a stored config keeps the space the experiment ran with
        if self.search_space_file is None:
            if self.search_space is None:
                return [(("searchSpaceFile",), "required field is missing (or give searchSpace inline)")]
            problem = search_space_size_problem(self.search_space)
            return [] if problem is None else [(("searchSpace",), problem)]
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
        from trialfleet.training_services.registry import get_platform

        try:
            service_class = get_platform(platform).config_class()
        except PlatformNotAvailableError as exc:
            raise ConfigError(str(exc), key_path="platform") from exc
        if any(fold(name) == "trainingservice" for name in fields):
            raise ConfigError("for_platform builds trainingService itself; pass its fields as keywords")
        top: dict[str, Any] = {"trainingService": {"platform": platform}}
        for name, value in fields.items():
            in_top, in_service = fold(name) in fields_of(cls), fold(name) in fields_of(service_class)
            (top["trainingService"] if in_service and not in_top else top)[name] = value
        return cls.from_dict(top)

    def updated(self, **fields: Any) -> ExperimentConfig:
        """A copy with some of :data:`UPDATABLE` changed while the experiment runs, validated by this model as a
        config file's values are (the REST server, the CLI and the Python API all come through here)."""

        def key(name: str) -> str:
            info = type(self).model_fields.get(name)
            return (info.alias or name) if info is not None else name

        unknown = set(fields) - UPDATABLE
        if unknown:
            raise ConfigError(
                f"cannot update {', '.join(sorted(map(key, unknown)))} of a running experiment; "
                f"updatable: {', '.join(sorted(map(key, UPDATABLE)))}"
            )
        data = self.to_json(include_secrets=True)
        for name, value in fields.items():
            data[key(name)] = value
        settings = BuildSettings(base_dir=Path.cwd(), check_paths=False, trust_stored=True)
        return build_experiment_config(data, settings, source="update")

    def to_json(self, *, include_secrets: bool = False) -> dict[str, Any]:
        """The canonical config: camelCase keys, unset (None) fields dropped, paths as strings, secrets
        shown as ``******`` unless ``include_secrets`` (passwords, tokens, and what looks like a credential in a
        command or an environment: :mod:`~trialfleet.config.credentials`). This is what is stored and served."""
        context = {"include_secrets": include_secrets}
        dumped: dict[str, Any] = self.model_dump(
            mode="json", by_alias=True, exclude_none=True, context=context
        )
        return dumped if include_secrets else mask_config(dumped)


def _prepare(data: dict[str, Any], settings: BuildSettings) -> list[tuple[KeyPath, str]]:
    """Move ``advisor`` into ``tuner``, merge fleet files (``fleetFile``) and copy the shortcut fields into the
    training-service block(s)."""
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
    if isinstance(services, dict) and any(fold(str(key)) == "placementweight" for key in services):
        settings.warnings.append(
            "trainingService.placementWeight only matters in a hybrid experiment (trainingService as a list); "
            "it is ignored"
        )
    for index, member in members:
        if not isinstance(member, dict):
            continue
        prefix: KeyPath = ("trainingService",) if index is None else ("trainingService", index)
        problems += merge_fleet_file(member, prefix, settings)
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
